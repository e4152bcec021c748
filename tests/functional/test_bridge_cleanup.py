"""A bridged network's namespace, tap, dnsmasq and metadata proxy across a compute agent killed
with SIGKILL: a real ``cloudseed compute --host alpha`` (the qemu driver, the Multiboot dummy
guest of tests/support/dummy_guest.py on a tap) and its API node, on SQLite.

- the guest runs on its tap in the network's namespace, with dnsmasq and the proxy;
- SIGKILL: the guest's QEMU dies with its agent (parent-death signal) and its tap with it;
  dnsmasq and the proxy are left behind, serving nobody;
- the next agent takes them down at its start and, resuming the guest, builds the network
  afresh (one dnsmasq, one proxy);
- killed again, the server and then the network deleted while no agent runs: the next agent
  leaves nothing of the network on the host.

Needs root, iproute2, nftables, dnsmasq (``NEEDS_NETNS``), QEMU and setpriv; CI has them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.compute import netns
from cloudseed.compute.bridge_plan import host_tag, namespace_name
from cloudseed.compute.errors import DriverError
from cloudseed.db.engines import Database
from cloudseed.images import service as images
from tests.support.cli import run
from tests.support.cluster import ADMIN, Cluster, registered, running_cluster, status_is, wait
from tests.support.dummy_guest import write_kernel
from tests.support.guest_netns import NEEDS_NETNS
from tests.support.ports import free_port

QEMU = shutil.which("qemu-system-x86_64")
pytestmark = [
    NEEDS_NETNS,
    pytest.mark.skipif(
        QEMU is None or shutil.which("setpriv") is None,
        reason="needs qemu-system-x86_64 and setpriv (Debian: qemu-system-x86, util-linux)",
    ),
]


def _cli(cluster: Cluster, *args: str) -> tuple[int, str]:
    """``cloudseed ARGS`` with the cluster's settings, in this process."""
    return run(*args, env=cluster.env)


def _image(cluster: Cluster) -> str:
    kernel = write_kernel(cluster.tmp / "kernel.bin")
    disk = cluster.tmp / "dummy.raw"
    disk.write_bytes(b"\0" * 4096)
    db = Database.connect("api", cluster.url)
    try:

        def add(session: Session) -> str:
            image = images.add_bootable(
                session, name="dummy", path=disk, disk_format="raw", kernel=kernel
            )
            return image.uuid

        return db.run(add, write=True)
    finally:
        db.dispose()


def _helpers(directory: Path, namespace: str) -> dict[str, list[int]]:
    """The network's helper processes: dnsmasq (in its namespace) and the metadata proxy and
    whatever else runs in its directory."""
    inside = netns.pids(namespace) if netns.exists(namespace) else []
    beside = netns.processes_in(directory) if directory.exists() else []
    return {"dnsmasq": sorted(inside), "proxy": sorted(beside)}


def _taps(namespace: str) -> int | None:
    """How many taps are on the network's bridge; None while there is no namespace (or it is
    being taken down: its teardown kills every process inside, ``ip -n`` included)."""
    try:
        return netns.ip(namespace, "link", "show", "master", "csbr0").count(": cst")
    except DriverError:
        return None


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_killed_agents_network_is_cleaned_up_at_its_next_start(tmp_path: Path) -> None:
    metadata_port = free_port()
    with running_cluster(
        "sqlite",
        tmp_path,
        metadata_port=metadata_port,
        CLOUDSEED_COMPUTE_DRIVER="qemu",
        CLOUDSEED_COMPUTE__LEASE_SECONDS="3",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET="cleanup-secret",
        CLOUDSEED_QEMU__BINARY=str(QEMU),
        CLOUDSEED_QEMU__ACCEL="tcg",
        CLOUDSEED_QEMU__SHUTDOWN_TIMEOUT="1",
        CLOUDSEED_QEMU__METADATA_URL=f"http://127.0.0.1:{metadata_port}",
    ) as cluster:
        image = _image(cluster)
        added = _cli(
            cluster,
            "network", "add", "blue", "--cidr", "10.64.0.0/24", "--gateway", "10.64.0.1",
            "--mode", "bridge", "-f", "value", "-c", "id",
        )  # fmt: skip
        assert added[0] == 0, added[1]
        network_id = added[1].strip()
        tag = host_tag((tmp_path / "state").resolve(), "alpha")
        namespace = namespace_name(tag, network_id)
        directory = (tmp_path / "state").resolve() / "networks" / tag / network_id
        cluster.start_agent("alpha")
        wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")

        body = {
            "server": {
                "name": "vm",
                "imageRef": image,
                "flavorRef": "1",
                "networks": [{"uuid": network_id}],
                "host": "alpha",
            }
        }
        r = httpx.post(f"{cluster.api}/v2.1/servers", json=body, headers=ADMIN, timeout=10)
        assert r.status_code == 202, r.text
        server_id = r.json()["server"]["id"]
        wait(status_is(cluster, server_id, "ACTIVE"), 60, cluster, "ACTIVE")

        # The guest's NIC is a tap on the network's bridge, handed to QEMU as a descriptor.
        command = (tmp_path / "state" / "instances" / server_id / "qemu.cmd").read_text()
        assert "-netdev tap,id=net0,fd=" in command
        assert _taps(namespace) == 1
        first = _helpers(directory, namespace)
        assert len(first["dnsmasq"]) == 1 and len(first["proxy"]) == 1, first

        # SIGKILL: QEMU and the tap go with the agent; dnsmasq and the proxy are left.
        cluster.kill("agent-alpha")
        wait(lambda: _taps(namespace) == 0, 30, cluster, "the tap gone with QEMU")
        assert all(_alive(p) for p in first["dnsmasq"] + first["proxy"])

        # The next agent takes them down and, resuming the guest, builds the network afresh.
        cluster.start_agent("alpha")
        wait(
            lambda: (
                "cst" in netns.ip(namespace, "link", "show", "master", "csbr0")
                if netns.exists(namespace)
                else False
            ),
            60,
            cluster,
            "the guest started again on a new tap",
        )
        wait(status_is(cluster, server_id, "ACTIVE"), 60, cluster, "ACTIVE again")
        assert not any(_alive(p) for p in first["dnsmasq"] + first["proxy"])
        second = _helpers(directory, namespace)
        assert len(second["dnsmasq"]) == 1 and len(second["proxy"]) == 1, second

        # Killed again; the server, then the network deleted while no agent runs.
        cluster.kill("agent-alpha")
        r = httpx.delete(f"{cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
        assert r.status_code == 204, r.text
        assert _cli(cluster, "network", "delete", "blue") == (0, "")
        assert netns.exists(namespace)  # nobody has cleaned up yet
        cluster.start_agent("alpha")
        wait(lambda: not netns.exists(namespace), 60, cluster, "the namespace gone")
        wait(lambda: not directory.exists(), 30, cluster, "the network's directory gone")
        assert not any(_alive(p) for p in second["dnsmasq"] + second["proxy"])
        assert not netns.names(namespace_name(tag, ""))
        cluster.close()
    # Nothing of the test's networks anywhere on the host (namespaces, processes).
    leftover = [p for p in os.listdir("/proc") if p.isdigit() and _in(tmp_path, int(p))]
    assert not leftover


def _in(tmp: Path, pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cwd").resolve().is_relative_to(tmp)
    except OSError:
        return False
