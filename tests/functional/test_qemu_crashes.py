"""Crash tests with the qemu driver: real ``cloudseed compute --host`` agents running real QEMU
processes (the Multiboot dummy guest, tests/support/dummy_guest.py), killed with SIGKILL while
an operation is inside the driver, then started again for the same host.

Where each agent is killed is made certain rather than timed:

- create, rebuild and HARD reboot: ``[qemu] binary`` is a wrapper that, while a hold file
  exists, stops before running QEMU (the driver has made the disk, written the relay config,
  and waits for QMP); the agent is killed once the wrapper says it got there;
- delete: the guest's QEMU is stopped (SIGSTOP), so the driver's SIGTERM stays pending and it
  waits for the process to go; the agent is killed once the SIGTERM is pending.

And an agent killed while its guest is settled ACTIVE: the guest dies with it (parent-death
signal), and the next agent must start it again (``[DEFAULT]
resume_guests_state_on_host_boot``). Each test deletes its servers afterwards, so a later
test's restart starts none of them again.

After the restart every instance must be final within the lease, with exactly one QEMU process
(none after delete), the new disk and config drive, the resume event in its action, the user
data of its final record served by the metadata service (through the guest's own relay config)
and in the config drive, and no QEMU or relay left anywhere once the cluster stops.

PostgreSQL only: what is new here is the driver finding its work half done, which does not
depend on the backend (the fake-driver crash tests in test_compute_hosts.py run the lease
semantics on SQLite and PostgreSQL); PostgreSQL is the many-hosts backend, and its metadata
service hears the agents' changes by NOTIFY, which is checked here across processes. One
backend also keeps the file within its CI budget (about 40 s on 2 cores).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.compute import guestfwd_relay
from cloudseed.configdrive import iso9660
from cloudseed.db.engines import Database
from cloudseed.images import service as images
from tests.support import databases
from tests.support.cluster import (
    ADMIN,
    Cluster,
    operation_state,
    operation_states,
    registered,
    running_cluster,
    server,
    status_is,
    wait,
)
from tests.support.dummy_guest import write_kernel
from tests.support.ports import free_port
from tests.support.waiting import wait_until

QEMU = shutil.which("qemu-system-x86_64")
pytestmark = pytest.mark.skipif(
    QEMU is None or shutil.which("qemu-img") is None or shutil.which("setpriv") is None,
    reason="needs qemu-system-x86_64, qemu-img and setpriv (Debian: qemu-system-x86, "
    "qemu-utils, util-linux)",
)
LEASE = 3
SECRET = "relay-secret"
NEWER = "2.105"  # user data on rebuild and HARD reboot, bootstrap history

# Runs QEMU, unless the hold file exists: then it says so and waits until the file goes. The
# driver is then inside its start, waiting for QMP (and under setpriv's parent-death signal,
# so a killed agent takes this wrapper with it).
WRAPPER = """#!/bin/sh
if [ -e {hold} ]; then
    : > {reached}
    while [ -e {hold} ]; do sleep 0.05; done
fi
exec {qemu} "$@"
"""


class QemuCluster:
    """A cluster whose agents run the qemu driver, with the hold switch and the guests'
    files at hand."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.hold = cluster.tmp / "hold"
        self.reached = cluster.tmp / "reached"
        self.instances = cluster.tmp / "state" / "instances"
        self.images: dict[str, str] = {}
        self.created: list[str] = []

    def add_images(self) -> None:
        """Two bootable images (a disk of 4 KiB and the dummy kernel), for builds and
        rebuilds. Their disks differ: the agent's image cache names a file by its content."""
        kernel = write_kernel(self.cluster.tmp / "kernel.bin")
        db = Database.connect("api", self.cluster.url)
        try:

            def work(session: Session) -> None:
                for fill, name in enumerate(("dummy", "dummy-2")):
                    disk = self.cluster.tmp / f"{name}.raw"
                    disk.write_bytes(bytes([fill]) * 4096)
                    image = images.add_bootable(
                        session, name=name, path=disk, disk_format="raw", kernel=kernel
                    )
                    self.images[name] = image.uuid

            db.run(work, write=True)
        finally:
            db.dispose()

    def held(self) -> None:
        self.reached.unlink(missing_ok=True)
        self.hold.touch()

    def kill_agent_and_restart(self) -> float:
        """SIGKILL the agent, let QEMU start again, start a new agent for the host; when."""
        self.cluster.kill("agent-alpha")
        self.hold.unlink(missing_ok=True)
        restarted = time.monotonic()
        self.cluster.start_agent("alpha")
        return restarted

    def directory(self, server_id: str) -> Path:
        return self.instances / server_id


def qemu_pids(directory: Path) -> list[int]:
    """QEMU processes running in ``directory`` (the driver starts them there)."""
    return [
        pid
        for pid, cwd, exe in _processes()
        if cwd == directory.resolve() and exe.name.startswith("qemu-system")
    ]


def leftovers(tmp: Path) -> list[str]:
    """Processes of this test's guests: QEMU and relays run in its instance directories."""
    return [f"{pid} {exe} in {cwd}" for pid, cwd, exe in _processes() if cwd.is_relative_to(tmp)]


def _processes() -> Iterator[tuple[int, Path, Path]]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd, exe = (entry / "cwd").resolve(strict=True), (entry / "exe").resolve()
            state = (entry / "stat").read_text().rsplit(") ", 1)[1][0]
        except (OSError, RuntimeError, IndexError):
            continue  # gone meanwhile, or not ours to look at
        if state != "Z":
            yield int(entry.name), cwd, exe


def sigterm_pending(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) & (
            1 << (signal.SIGTERM - 1)
        ):
            return True
    return False


def served_user_data(directory: Path) -> bytes:
    """What the guest is served at /openstack/latest/user_data, asked through its own relay
    (run as QEMU runs it: in the instance directory, with the driver's config)."""
    request = b"GET /openstack/latest/user_data HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"
    relay = subprocess.run(
        [sys.executable, "-I", guestfwd_relay.__file__, "metadata-relay.json"],
        cwd=directory,
        input=request,
        capture_output=True,
        timeout=30,
        check=True,
    )
    head, _, body = relay.stdout.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), relay.stdout
    return body


def drive_user_data(directory: Path) -> bytes:
    with (directory / "disk.config").open("rb") as drive:
        return iso9660.read(io.BytesIO(drive.read()))["openstack/latest/user_data"]


def backing_file(directory: Path) -> str:
    info = subprocess.run(
        ["qemu-img", "info", "--force-share", "--output=json", str(directory / "disk.qcow2")],
        check=True,
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    ).stdout
    found: str = json.loads(info)["backing-filename"]
    return found


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QemuCluster]:
    """One cluster for the module (per xdist worker): its start is most of a test's time.
    Each test has a server of its own and leaves the host's agent running."""
    assert QEMU is not None
    tmp = tmp_path_factory.mktemp("qemu-cluster")
    wrapper = tmp / "qemu-system-x86_64"
    wrapper.write_text(WRAPPER.format(hold=tmp / "hold", reached=tmp / "reached", qemu=QEMU))
    wrapper.chmod(0o755)
    metadata_port = free_port()
    try:
        with running_cluster(
            "postgresql",
            tmp,
            metadata_port=metadata_port,
            CLOUDSEED_COMPUTE_DRIVER="qemu",
            CLOUDSEED_COMPUTE__LEASE_SECONDS=str(LEASE),
            CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
            CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=SECRET,
            CLOUDSEED_QEMU__BINARY=str(wrapper),
            CLOUDSEED_QEMU__ACCEL="tcg",
            CLOUDSEED_QEMU__SHUTDOWN_TIMEOUT="1",
            CLOUDSEED_QEMU__METADATA_URL=f"http://127.0.0.1:{metadata_port}",
        ) as cluster:
            made = QemuCluster(cluster)
            made.add_images()
            cluster.start_agent("alpha")
            wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
            try:
                yield made
            finally:
                made.hold.unlink(missing_ok=True)
                cluster.close()
                # The killed agents' guests went with them (parent-death signal); nothing of
                # this cluster may run on once its agents are gone.
                try:
                    wait_until(
                        lambda: not leftovers(tmp), timeout=10, interval=0.1, max_interval=0.1
                    )
                except AssertionError:
                    raise AssertionError(leftovers(tmp)) from None
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))


@pytest.fixture()
def qemu(shared: QemuCluster) -> Iterator[QemuCluster]:
    """The shared cluster; the test's servers are deleted (their guests gone) after it, so
    the next test's restarted agent does not start them again meanwhile."""
    assert "agent-alpha" in shared.cluster.processes
    shared.hold.unlink(missing_ok=True)
    yield shared
    shared.hold.unlink(missing_ok=True)
    for server_id in shared.created:
        r = httpx.delete(f"{shared.cluster.api}/v2.1/servers/{server_id}", headers=ADMIN)
        assert r.status_code in (204, 404), r.text
    wait(
        lambda: not any(shared.directory(s).exists() for s in shared.created),
        30,
        shared.cluster,
        "the test's guests destroyed",
    )
    shared.created.clear()


def _create(qemu: QemuCluster, user_data: bytes) -> str:
    body = {
        "server": {
            "name": "vm",
            "imageRef": qemu.images["dummy"],
            "flavorRef": "1",
            "networks": "none",
            "host": "alpha",
            "config_drive": True,
            "user_data": base64.b64encode(user_data).decode(),
        }
    }
    r = httpx.post(f"{qemu.cluster.api}/v2.1/servers", json=body, headers=ADMIN, timeout=10)
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    qemu.created.append(server_id)
    return server_id


def _action(qemu: QemuCluster, server_id: str, body: dict[str, Any]) -> None:
    r = httpx.post(
        f"{qemu.cluster.api}/v2.1/servers/{server_id}/action",
        json=body,
        headers={**ADMIN, "OpenStack-API-Version": f"compute {NEWER}"},
        timeout=10,
    )
    assert r.status_code == 202, r.text


def _events(qemu: QemuCluster, server_id: str) -> list[str]:
    """The events of the server's latest action."""
    headers = {**ADMIN, "OpenStack-API-Version": "compute 2.84"}
    base = f"{qemu.cluster.api}/v2.1/servers/{server_id}/os-instance-actions"
    request_id = httpx.get(base, headers=headers).json()["instanceActions"][0]["request_id"]
    action = httpx.get(f"{base}/{request_id}", headers=headers).json()["instanceAction"]
    return [e["event"] for e in action["events"]]


def _user_data_history(qemu: QemuCluster, server_id: str) -> list[str]:
    history = httpx.get(
        f"{qemu.cluster.api}/v2.1/servers/{server_id}/bootstrap-history",
        headers={**ADMIN, "OpenStack-API-Version": f"compute {NEWER}"},
    ).json()["bootstrap_history"]
    return [c["action"] for c in history if c["field"] == "user_data"]


def _active(qemu: QemuCluster, server_id: str, timeout: float = 30) -> None:
    wait(status_is(qemu.cluster, server_id, "ACTIVE"), timeout, qemu.cluster, "ACTIVE")


def _interrupted(qemu: QemuCluster, server_id: str) -> float:
    """Wait until the agent is inside the driver's start (held), kill it, restart it."""
    wait(qemu.reached.exists, 30, qemu.cluster, "the driver starting QEMU")
    assert operation_state(qemu.cluster, server_id) == "running"
    return qemu.kill_agent_and_restart()


def _assert_final(qemu: QemuCluster, server_id: str, restarted: float, user_data: bytes) -> None:
    """ACTIVE within the lease (plus an agent's start and a QEMU start), one QEMU, the user
    data of the record served and on the drive, the resume in the action."""
    _active(qemu, server_id, LEASE + 20)
    assert time.monotonic() - restarted < LEASE + 10, qemu.cluster.logs()
    directory = qemu.directory(server_id)
    assert len(qemu_pids(directory)) == 1
    shown = server(qemu.cluster, server_id)
    assert base64.b64decode(shown["OS-EXT-SRV-ATTR:user_data"]) == user_data
    assert served_user_data(directory) == user_data
    assert drive_user_data(directory) == user_data
    assert _events(qemu, server_id)[-1] == "compute_resume_operation"


def test_an_agent_killed_mid_create_leaves_one_guest(qemu: QemuCluster) -> None:
    qemu.held()
    server_id = _create(qemu, b"first")
    restarted = _interrupted(qemu, server_id)
    assert qemu_pids(qemu.directory(server_id)) == []  # the kill took the starting QEMU
    _assert_final(qemu, server_id, restarted, b"first")
    assert _events(qemu, server_id) == [
        "compute__do_build_and_run_instance",
        "compute_resume_operation",
    ]
    assert _user_data_history(qemu, server_id) == ["create"]


def test_an_agent_killed_mid_rebuild_leaves_the_new_disk_and_drive(qemu: QemuCluster) -> None:
    server_id = _create(qemu, b"first")
    _active(qemu, server_id)
    directory = qemu.directory(server_id)
    assert served_user_data(directory) == b"first"  # the metadata service has it cached now
    qemu.held()
    new = base64.b64encode(b"second").decode()
    _action(qemu, server_id, {"rebuild": {"imageRef": qemu.images["dummy-2"], "user_data": new}})
    restarted = _interrupted(qemu, server_id)
    _assert_final(qemu, server_id, restarted, b"second")
    # The new disk is the one made from the new image (an inode number can come back: no proof),
    # as the agent's image cache holds it.
    new_image = hashlib.sha256((qemu.cluster.tmp / "dummy-2.raw").read_bytes()).hexdigest()
    assert backing_file(directory) == str(qemu.cluster.tmp / "state" / "_base" / new_image)
    assert server(qemu.cluster, server_id)["image"]["id"] == qemu.images["dummy-2"]
    assert _events(qemu, server_id) == ["compute_rebuild_instance", "compute_resume_operation"]
    assert _user_data_history(qemu, server_id) == ["create", "rebuild"]  # applied once


def test_an_agent_killed_mid_hard_reboot_with_user_data_applies_it_once(
    qemu: QemuCluster,
) -> None:
    server_id = _create(qemu, b"first")
    _active(qemu, server_id)
    directory = qemu.directory(server_id)
    assert served_user_data(directory) == b"first"
    qemu.held()
    new = base64.b64encode(b"second").decode()
    _action(qemu, server_id, {"reboot": {"type": "HARD", "user_data": new}})
    restarted = _interrupted(qemu, server_id)
    _assert_final(qemu, server_id, restarted, b"second")
    assert _events(qemu, server_id) == ["compute_reboot_instance", "compute_resume_operation"]
    assert _user_data_history(qemu, server_id) == ["create", "reboot"]


def test_an_agent_killed_mid_delete_still_destroys_the_guest(qemu: QemuCluster) -> None:
    server_id = _create(qemu, b"first")
    _active(qemu, server_id)
    directory = qemu.directory(server_id)
    [pid] = qemu_pids(directory)
    # A guest that does not go when told: the driver sends SIGTERM and waits for it.
    os.kill(pid, signal.SIGSTOP)
    r = httpx.delete(f"{qemu.cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
    assert r.status_code == 204
    wait(lambda: sigterm_pending(pid), 30, qemu.cluster, "the driver's SIGTERM sent")
    restarted = qemu.kill_agent_and_restart()
    wait(lambda: not directory.exists(), LEASE + 20, qemu.cluster, "the guest destroyed")
    assert time.monotonic() - restarted < LEASE + 10
    wait(
        lambda: operation_states(qemu.cluster, server_id) == ["done", "done"],
        LEASE + 20,
        qemu.cluster,
        "the delete done",
    )
    assert qemu_pids(directory) == [] and leftovers(qemu.instances) == []


def _latest_action(qemu: QemuCluster, server_id: str) -> dict[str, Any]:
    headers = {**ADMIN, "OpenStack-API-Version": "compute 2.84"}
    base = f"{qemu.cluster.api}/v2.1/servers/{server_id}/os-instance-actions"
    request_id = httpx.get(base, headers=headers).json()["instanceActions"][0]["request_id"]
    found: dict[str, Any] = httpx.get(f"{base}/{request_id}", headers=headers).json()[
        "instanceAction"
    ]
    return found


def test_an_agent_killed_while_its_guest_runs_starts_it_again(qemu: QemuCluster) -> None:
    """Issue 14: the guest dies with its agent (parent-death signal); the database still says
    ACTIVE and RUNNING. The host's next agent finds it switched off and starts it again
    (``[DEFAULT] resume_guests_state_on_host_boot``, true by default), through a queued
    start recorded as the action 'start'."""
    server_id = _create(qemu, b"first")
    _active(qemu, server_id)
    directory = qemu.directory(server_id)
    assert len(qemu_pids(directory)) == 1
    qemu.cluster.kill("agent-alpha")
    wait(lambda: qemu_pids(directory) == [], 10, qemu.cluster, "the guest gone with its agent")
    assert server(qemu.cluster, server_id)["OS-EXT-STS:power_state"] == 1  # not true any more
    restarted = time.monotonic()
    qemu.cluster.start_agent("alpha")

    def started_again() -> bool:
        action = _latest_action(qemu, server_id)
        return action["action"] == "start" and all(e["finish_time"] for e in action["events"])

    wait(started_again, 30, qemu.cluster, "the guest started again")
    assert time.monotonic() - restarted < 20, qemu.cluster.logs()
    shown = server(qemu.cluster, server_id)
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert shown["OS-EXT-STS:power_state"] == 1
    assert len(qemu_pids(directory)) == 1
    action = _latest_action(qemu, server_id)
    assert [(e["event"], e["result"]) for e in action["events"]] == [
        ("compute_start_instance", "Success")
    ]
    assert action["user_id"].startswith("alpha/")  # the agent that found it switched off
    assert served_user_data(directory) == b"first"  # its relay config written again
