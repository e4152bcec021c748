"""A real cloudseed with the qemu driver, for the end-to-end scenarios.

``E2ECloud`` runs ``cloudseed db sync`` and ``cloudseed serve`` as the operator would (own
state directory, loopback ports, signing metadata proxy mode, a DynamicJSON vendordata target
named ``cloud-init``), registers the image built by ``make image-debian`` with its kernel and
initramfs, a flavor and a network, and talks to the API over HTTP. Every assertion is made from
outside the guest: the user data scripts (``guest_scripts.py``) write ``E2E ...`` lines to the
serial console, which the scenarios read back through ``os-getConsoleOutput``.

The guest network is QEMU's user-mode network (``169.254.169.0/24``, gateway .2, DNS .3), so
the registered network is that subnet and each server asks for the address slirp's DHCP hands
out, .15; cloud-init then configures the same address statically from network_data.json.
Scenarios 7 and 8 boot on bridged networks instead (``bridged.py``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from tests.e2e.guest_scripts import Markers, b64, markers, user_data
from tests.support.ports import free_port
from tests.support.waiting import wait_until

QUIET_LOCK = Path("/tmp/cloudseed-quiet.lock")
# The waits come from boots measured on this 2-core machine without KVM (docs/benchmarks.md,
# "End-to-end boots under QEMU"). From the API request to the guest's END marker one guest took
# 29-84 s on an idle machine, 94-199 s with the load average at 7-10 (other test suites
# running beside it) and up to 305 s at 15-17 (two e2e runs at once); two guests booting
# together took 88-96 s idle and 147-163 s loaded. A wait allows three times the slowest boot
# seen, per guest booting at the same time, so only a guest that is stuck fails it.
SLOWEST_BOOT = 300.0  # seconds: one guest, request to END, load average 15-17
BOOT_TIMEOUT = 3 * SLOWEST_BOOT  # times the guests booting together (wait_run's ``together``)
# QEMU runs 0.2-0.9 s after the API request (loaded); ACTIVE follows.
ACTIVE_TIMEOUT = 120.0
# A restarted `cloudseed serve` answers /healthz 3-7 s after the old one was told to stop.
SERVE_TIMEOUT = 120.0
GUEST_ADDRESS = "169.254.169.15"
# The e2e image booted with its kernel and initramfs: the root partition is found by its label.
KERNEL_COMMAND_LINE = "root=LABEL=rootfs rw console=ttyS0,115200"

# What `cloudseed ... add` prints for a script: the new record's id alone.
ID_ONLY = ("-f", "value", "-c", "id")
# The embedded agent's compute host (`cloudseed serve`); scenario 6 adds a second one.
FIRST_HOST = "e2e-host-a"
# noauth2's administrator, at the microversion that shows a server's host.
ADMIN = {"X-Auth-Token": "admin:e2e-project", "OpenStack-API-Version": "compute 2.74"}


def wait_until_quiet() -> None:
    """Someone is measuring on this machine while the lock exists; a TCG guest would spoil it."""
    while QUIET_LOCK.exists():
        print(f"waiting: {QUIET_LOCK} exists", file=sys.stderr)
        time.sleep(30)


@dataclass
class Boot:
    server_id: str
    run: str
    seconds: float  # from the API request to the END marker, as seen through the API
    guest_uptime: float  # the guest's own uptime at the END marker
    markers: Markers


class E2ECloud:
    def __init__(
        self, *, image_dir: Path, work: Path, vendordata_url: str, database_url: str
    ) -> None:
        """``database_url``: both databases' (PostgreSQL when the machine has it; else SQLite,
        outside the data directory, which an extra host must not see: ``second_host``)."""
        self.image_dir = image_dir
        self.work = work
        self.api_port = free_port()
        self.metadata_port = free_port()
        self.environ = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CLOUDSEED_STATE_PATH": str(work / "state"),
            "CLOUDSEED_API_DATABASE__CONNECTION": database_url,
            "CLOUDSEED_DATABASE__CONNECTION": database_url,
            # The embedded agent's host; a second host (second_host) may join it.
            "CLOUDSEED_HOST": FIRST_HOST,
            "CLOUDSEED_COMPUTE_DRIVER": "qemu",
            "CLOUDSEED_OSAPI_COMPUTE_LISTEN_PORT": str(self.api_port),
            "CLOUDSEED_METADATA_LISTEN_PORT": str(self.metadata_port),
            "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
            "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": secrets.token_hex(16),
            "CLOUDSEED_API__VENDORDATA_PROVIDERS": "StaticJSON,DynamicJSON",
            "CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS": f"cloud-init@{vendordata_url}",
            "CLOUDSEED_QEMU__SHUTDOWN_TIMEOUT": "20",
            # The Debian 12 guests need no x86-64-v2; under TCG qemu64 boots them about 18 %
            # faster than the default max (docs/qemu-driver.md). The README's boots keep max.
            "CLOUDSEED_QEMU__CPU_MODEL": "qemu64",
            "CLOUDSEED_LOG_LEVEL": "info",
        }
        # The code under test, when it is not the installed one (PYTHONPATH=src from a
        # worktree, whose migrations may differ from the installed tree's); absolute, as the
        # driver's helpers run in directories of their own.
        if os.environ.get("PYTHONPATH"):
            self.environ["PYTHONPATH"] = os.pathsep.join(
                str(Path(entry).resolve()) for entry in os.environ["PYTHONPATH"].split(os.pathsep)
            )
        self.cloudseed = str(Path(sys.executable).with_name("cloudseed"))
        self.process: subprocess.Popen[bytes] | None = None
        # Where each extra compute host keeps its guests: host name -> its state directory.
        self.other_hosts: dict[str, Path] = {}
        self.log: BinaryIO | None = None
        self.client = httpx.Client(
            base_url=f"http://127.0.0.1:{self.api_port}",
            headers={"X-Auth-Token": "e2e:e2e-project"},
            timeout=60,
        )

    # -- the operator's side ---------------------------------------------------------------

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [self.cloudseed, *args],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"cloudseed {' '.join(args)}: {done.stderr}"
        return done.stdout.strip()

    def set_up(self) -> dict[str, str]:
        self.cli("db", "sync")
        image = self.register_image("debian-e2e", KERNEL_COMMAND_LINE)
        # One vCPU: under TCG on cores kept busy by other work (CI runs make test beside), a
        # guest with two spent 64-65 s of CPU on scenario 2 and one 43-44 s, and booted 19 %
        # sooner; on idle cores two were 10 % quicker for the same CPU (docs/benchmarks.md, "CI
        # run"). The README's walkthrough keeps its own flavor of two.
        self.cli("flavor", "add", "e2e", "--vcpus", "1", "--ram", "1024", "--disk", "2")
        network = self.cli(
            "network",
            "add",
            "slirp",
            "--cidr",
            "169.254.169.0/24",
            "--gateway",
            "169.254.169.2",
            "--dns",
            "169.254.169.3",
            *ID_ONLY,
        )
        return {"image": image, "network": network}

    def register_image(self, name: str, command_line: str) -> str:
        """`make image-debian`'s disk, booted here with its kernel and initramfs (QEMU's
        -kernel/-initrd: the partition is found by its label) and ``command_line``; the README
        walkthrough (test_readme.py) boots the same disk through its own GRUB. Its id."""
        return self.cli(
            "image",
            "add",
            name,
            "--file",
            str(self.image_dir / "debian-12-cloudseed.qcow2"),
            "--disk-format",
            "qcow2",
            "--property",
            f"os_command_line={command_line}",
            "--kernel",
            str(self.image_dir / "vmlinuz"),
            "--initrd",
            str(self.image_dir / "initrd.img"),
            # Debian's cloud kernel has no AHCI driver, so q35's default
            # (SATA) CD-ROM is invisible to it; virtio-scsi it has.
            "--property",
            "hw_cdrom_bus=scsi",
            # The image's login user, as `make image-debian` says to register it: `cloudseed
            # server ssh` and the guest agent's key pushes (scenario 7) use it.
            "--property",
            "os_admin_user=debian",
            *ID_ONLY,
        )

    @contextmanager
    def serving(self) -> Iterator[None]:
        self.start()
        try:
            yield
        finally:
            self.stop()

    def start(self) -> None:
        self.log = (self.work / "cloudseed.log").open("ab")
        self.process = subprocess.Popen(
            [self.cloudseed, "serve"], env=self.environ, stdout=self.log, stderr=self.log
        )
        process = self.process

        def healthy() -> bool:
            try:
                if self.client.get("/healthz").status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            assert process.poll() is None, "cloudseed serve exited"
            return False

        wait_until(
            healthy,
            timeout=SERVE_TIMEOUT,
            interval=0.2,
            max_interval=0.2,
            what="cloudseed serve up",
        )

    def stop(self) -> None:
        """SIGTERM, as an operator would: the service switches every guest off on its way."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        if self.log is not None:
            self.log.close()

    @contextmanager
    def second_host(self, host: str) -> Iterator[subprocess.Popen[bytes]]:
        """A second compute host on this machine, set up as one on a machine of its own:
        `cloudseed compute --host` with a state directory of its own (its guests' files, its
        image cache), the databases and the API's URLs, and nothing else of the API node's
        (it has no metadata listener: its guests' proxies use the API node's). As root (where
        `make e2e` runs) it runs in a mount namespace of its own, where a private tmpfs hides
        the API node's data directory (the image store, the first host's guests): it can
        only fetch images over HTTP. Stopped with SIGTERM afterwards, which switches its
        guests off."""
        state = self.work / f"host-{host}"
        environ = {
            **self.environ,
            "CLOUDSEED_STATE_PATH": str(state),
            "CLOUDSEED_GLANCE__API_SERVERS": f"http://127.0.0.1:{self.api_port}/image",
            "CLOUDSEED_QEMU__METADATA_URL": f"http://127.0.0.1:{self.metadata_port}",
        }
        argv = [self.cloudseed, "compute", "--host", host]
        if os.geteuid() == 0 and shutil.which("unshare"):
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-ec",
                'mount -t tmpfs -o size=1m,mode=0 api-node-data-hidden "$1"; shift; exec "$@"',
                "sh",
                str(self.work / "state"),
                *argv,
            ]
        with (self.work / f"compute-{host}.log").open("ab") as log:
            agent = subprocess.Popen(argv, env=environ, stdout=log, stderr=log)
        self.other_hosts[host] = state
        try:

            def registered() -> bool:
                assert agent.poll() is None, f"cloudseed compute --host {host} exited"
                return self.host_is_up(host)

            wait_until(
                registered,
                timeout=SERVE_TIMEOUT,
                interval=0.5,
                max_interval=0.5,
                what=f"{host} registered",
            )
            yield agent
        finally:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(120)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
            del self.other_hosts[host]

    @contextmanager
    def api_only_node(self) -> Iterator[httpx.Client]:
        """`cloudseed serve --no-compute` beside the service, on ports of its own, with the
        same databases: a client of its compute API (it runs no compute host, so every
        console it shows is one an agent stored in the database)."""
        port = free_port()
        environ = {
            **self.environ,
            "CLOUDSEED_STATE_PATH": str(self.work / "state-api-only"),
            "CLOUDSEED_OSAPI_COMPUTE_LISTEN_PORT": str(port),
            "CLOUDSEED_METADATA_LISTEN_PORT": str(free_port()),
        }
        with (self.work / "api-only.log").open("ab") as log:
            node = subprocess.Popen(
                [self.cloudseed, "serve", "--no-compute"], env=environ, stdout=log, stderr=log
            )
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"X-Auth-Token": "e2e:e2e-project"},
            timeout=60,
        )

        def healthy() -> bool:
            assert node.poll() is None, "cloudseed serve --no-compute exited"
            try:
                return client.get("/healthz").status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_until(
                healthy,
                timeout=SERVE_TIMEOUT,
                interval=0.2,
                max_interval=0.2,
                what="the API-only node up",
            )
            yield client
        finally:
            client.close()
            node.send_signal(signal.SIGTERM)
            node.wait(60)

    def host_is_up(self, host: str) -> bool:
        r = self.client.get("/v2.1/os-services", headers=ADMIN)
        assert r.status_code == 200, r.text
        return any(
            s["host"] == host and s["state"] == "up" and s["status"] == "enabled"
            for s in r.json()["services"]
        )

    def host_of(self, server_id: str) -> str:
        r = self.client.get(f"/v2.1/servers/{server_id}", headers=ADMIN)
        assert r.status_code == 200, r.text
        host: str = r.json()["server"]["OS-EXT-SRV-ATTR:host"]
        return host

    @contextmanager
    def reconfigured(self, changes: dict[str, str]) -> Iterator[None]:
        """The service restarted with ``changes`` to its environment, and restarted as before
        afterwards. Settings such as ``[DEFAULT] config_drive_format`` are read at start, as in
        Nova. A restart switches every guest off, so call this with none running."""
        saved = dict(self.environ)
        self.stop()
        self.environ.update(changes)
        try:
            self.start()
            yield
        finally:
            self.stop()
            self.environ.clear()
            self.environ.update(saved)
            self.start()

    def leftover_qemus(self, *, grace: float = 30.0) -> list[str]:
        """QEMU processes still running on this cloud's instances after ``grace`` seconds.

        The API forgets a deleted server at once and switches its guest off in the background
        (as Nova does), so the process may outlive the 404 by a moment."""
        deadline = time.monotonic() + grace
        while (found := self._qemus()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found

    def _qemus(self) -> list[str]:
        # Any host's: the first one's under state/, an extra one's under host-NAME/.
        state = str(self.work)
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                    cwd = os.readlink(entry / "cwd")
                except OSError:
                    continue
                if b"qemu-system" in cmdline and cwd.startswith(state):
                    found.append(entry.name)
        return found

    # -- the user's side -------------------------------------------------------------------

    def add_keypair(self, name: str, public_key: str) -> None:
        r = self.client.post(
            "/v2.1/os-keypairs", json={"keypair": {"name": name, "public_key": public_key}}
        )
        assert r.status_code == 200, r.text

    def wait_status(
        self, server_id: str, status: str, timeout: float = ACTIVE_TIMEOUT
    ) -> dict[str, Any]:

        def settled() -> dict[str, Any] | None:
            r = self.client.get(f"/v2.1/servers/{server_id}")
            assert r.status_code == 200, r.text
            server: dict[str, Any] = r.json()["server"]
            if server["status"] == status and server.get("OS-EXT-STS:task_state") is None:
                return server
            assert server["status"] != "ERROR", server.get("fault")
            return None

        return wait_until(
            settled, timeout=timeout, interval=1, max_interval=1, what=f"{server_id} {status}"
        )

    def console(self, server_id: str, client: httpx.Client | None = None) -> str:
        """The guest's console through the compute API (``client``: another node's). A guest
        of an extra host is answered from the tail its agent stored in the database, at most
        ``[compute] console_tail_interval`` (5 s) old; none stored yet is ""."""
        r = (client or self.client).post(
            f"/v2.1/servers/{server_id}/action", json={"os-getConsoleOutput": {"length": -1}}
        )
        if r.status_code == 404 and r.json()["itemNotFound"]["message"].startswith("Guest"):
            return ""
        assert r.status_code == 200, r.text
        output: str = r.json()["output"]
        return output

    def wait_run(self, server_id: str, run: str, started: float, *, together: int = 1) -> Boot:
        """Wait for the run's END marker; ``together`` guests boot at the same time (they share
        the two cores, so each takes about that many times as long)."""

        def finished() -> Boot | None:
            found = markers(self.console(server_id), run)
            if not found.done:
                return None
            uptime = float(found.of("END")[0].removeprefix("uptime="))
            return Boot(server_id, run, time.monotonic() - started, uptime, found)

        try:
            return wait_until(
                finished,
                timeout=started + together * BOOT_TIMEOUT - time.monotonic(),
                interval=2,
                max_interval=2,
            )
        except AssertionError:
            raise AssertionError(
                f"run {run} did not finish; console ends with:\n" + self.console(server_id)[-3000:]
            ) from None

    def create(
        self,
        ids: dict[str, str],
        *,
        run: str,
        key_name: str,
        script: str,
        config_drive: bool = False,
        address: str = GUEST_ADDRESS,
        metadata: dict[str, str] | None = None,
    ) -> tuple[str, float]:
        """POST /servers; the new server's id and when the request was made."""
        body: dict[str, Any] = {
            "server": {
                "name": f"e2e-{run}",
                "imageRef": ids["image"],
                "flavorRef": "e2e",
                "key_name": key_name,
                "user_data": b64(script),
                "networks": [{"uuid": ids["network"], "fixed_ip": address}],
            }
        }
        if config_drive:
            body["server"]["config_drive"] = True
        if metadata:
            body["server"]["metadata"] = metadata
        started = time.monotonic()
        r = self.client.post("/v2.1/servers", json=body)
        assert r.status_code == 202, r.text
        return str(r.json()["server"]["id"]), started

    def boot(
        self,
        ids: dict[str, str],
        *,
        run: str,
        key_name: str,
        password: str | None = None,
        script: str | None = None,
        config_drive: bool = False,
        servers: list[str] | None = None,
        metadata: dict[str, str] | None = None,
    ) -> Boot:
        """Create a server and wait for its run to finish; its id goes into ``servers``
        as soon as it exists, so that a boot that fails is cleaned up too."""
        wait_until_quiet()
        text = script if script is not None else user_data(run, post_password=password)
        server_id, started = self.create(
            ids,
            run=run,
            key_name=key_name,
            script=text,
            config_drive=config_drive,
            metadata=metadata,
        )
        if servers is not None:
            servers.append(server_id)
        self.wait_status(server_id, "ACTIVE")
        return self.wait_run(server_id, run, started)

    def rebuild(
        self, boot: Boot, ids: dict[str, str], *, run: str, key_name: str, script: str | None = None
    ) -> Boot:
        wait_until_quiet()
        started = time.monotonic()
        r = self.client.post(
            f"/v2.1/servers/{boot.server_id}/action",
            headers={"OpenStack-API-Version": "compute 2.57"},
            json={
                "rebuild": {
                    "imageRef": ids["image"],
                    "key_name": key_name,
                    "user_data": b64(script if script is not None else user_data(run)),
                }
            },
        )
        assert r.status_code == 202, r.text
        self.wait_status(boot.server_id, "ACTIVE")
        return self.wait_run(boot.server_id, run, started)

    def update_user_data_and_reboot(
        self, boot: Boot, *, run: str, script: str, notice_seconds: int = 0
    ) -> Boot:
        """PUT the new user data (2.105, no config drive), then a HARD reboot; with
        ``notice_seconds`` (2.111) the guest's watcher acknowledges the notice, and waiting
        for the reboot allows it the boot timeout."""
        latest = {"OpenStack-API-Version": "compute 2.105"}
        r = self.client.put(
            f"/v2.1/servers/{boot.server_id}",
            headers=latest,
            json={"server": {"user_data": b64(script)}},
        )
        assert r.status_code == 200, r.text
        wait_until_quiet()
        started = time.monotonic()
        reboot: dict[str, Any] = {"type": "HARD"}
        headers = {}
        if notice_seconds:
            reboot["notice_seconds"] = notice_seconds
            headers = {"OpenStack-API-Version": "compute 2.111"}
        r = self.client.post(
            f"/v2.1/servers/{boot.server_id}/action", json={"reboot": reboot}, headers=headers
        )
        assert r.status_code == 202, r.text
        self.wait_status(
            boot.server_id, "ACTIVE", timeout=BOOT_TIMEOUT if notice_seconds else ACTIVE_TIMEOUT
        )
        return self.wait_run(boot.server_id, run, started)

    def reboot_with_user_data(self, boot: Boot, *, run: str, script: str) -> Boot:
        """A HARD reboot carrying new user data (2.105): with a config drive, the drive is
        built again with it before the guest starts."""
        wait_until_quiet()
        started = time.monotonic()
        r = self.client.post(
            f"/v2.1/servers/{boot.server_id}/action",
            headers={"OpenStack-API-Version": "compute 2.105"},
            json={"reboot": {"type": "HARD", "user_data": b64(script)}},
        )
        assert r.status_code == 202, r.text
        self.wait_status(boot.server_id, "ACTIVE")
        return self.wait_run(boot.server_id, run, started)

    def delete(self, server_id: str) -> None:
        r = self.client.delete(f"/v2.1/servers/{server_id}")
        assert r.status_code == 204, r.text
        wait_until(
            lambda: self.client.get(f"/v2.1/servers/{server_id}").status_code == 404,
            timeout=120,
            interval=1,
            max_interval=1,
            what=f"server {server_id} deleted",
        )


@contextmanager
def deleted_afterwards(cloud: E2ECloud) -> Iterator[list[str]]:
    """Servers put in the list are deleted at the end, also when the scenario fails: each
    holds the one guest address of its network, so a leftover would fail every later boot."""
    servers: list[str] = []
    try:
        yield servers
    except BaseException:
        for server_id in servers:
            # The scenario's own failure is the one to report.
            with suppress(Exception):
                cloud.delete(server_id)
        raise
    for server_id in servers:
        cloud.delete(server_id)
    assert cloud.leftover_qemus() == [], "QEMU still running after the delete"


def ssh_keypair(directory: Path, name: str) -> tuple[Path, str]:
    """A new ed25519 key pair made by ssh-keygen: the private key's path and the public line."""
    path = directory / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
    )
    return path, (directory / f"{name}.pub").read_text().strip()


def ssh_login(
    command: list[str], key: Path, *options: str, remote: str = "echo logged-in"
) -> subprocess.CompletedProcess[str]:
    """``command`` (what `cloudseed server ssh` prints) with ``key`` only, running ``remote``."""
    return subprocess.run(
        [
            *command,
            "-i",
            str(key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=60",
            *options,
            remote,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def tidy(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
