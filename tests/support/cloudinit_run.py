"""Running Debian's cloud-init (22.4) against a metadata service: installing the package
if need be, one run of tests/support/cloudinit_client.py under Debian's python3, and the relay
that names the guest in signed headers as Neutron's metadata proxy does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.support.guests import Guest
from tests.support.metadata_relay import Relay, metadata_relay

DEBIAN_PYTHON = Path("/usr/bin/python3")


CLOUDINIT = Path("/usr/lib/python3/dist-packages/cloudinit")


CLIENT = Path(__file__).parents[1] / "support" / "cloudinit_client.py"


CLIENT_TIMEOUT = 120  # seconds for one client run; normally 1-3 s (the IMDSv2 one about 12 s)


INSTALL_TIMEOUT = 900


SECRET = "relay-shared-secret"


STATIC_VENDORDATA = "#cloud-config\nbootcmd: [echo static vendordata]\n"


DYNAMIC_VENDORDATA = "#cloud-config\nruncmd: [echo dynamic vendordata]\n"


def _ensure_cloud_init() -> str | None:
    """Install Debian's cloud-init if it is missing and we may; the reason if it cannot be
    used, else None."""
    if not (CLOUDINIT / "__init__.py").is_file():
        apt = shutil.which("apt-get")
        if apt is None:
            return (
                "Debian's cloud-init package is not installed and there is no apt-get to install it"
            )
        if os.geteuid() != 0:
            return (
                "Debian's cloud-init package is not installed; as root: "
                "apt-get install --no-install-recommends cloud-init"
            )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
        install = [
            apt,
            "-o",
            "DPkg::Lock::Timeout=300",
            "install",
            "-y",
            "--no-install-recommends",
            "cloud-init",
        ]
        result = subprocess.run(
            install, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
        if result.returncode != 0:  # perhaps stale package lists
            subprocess.run(
                [apt, "-o", "DPkg::Lock::Timeout=300", "update"],
                env=env,
                capture_output=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
            result = subprocess.run(
                install,
                env=env,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
                check=False,
            )
        if result.returncode != 0:
            return (
                f"apt-get install cloud-init failed:\n{result.stdout[-2000:]}"
                f"{result.stderr[-2000:]}"
            )
    if not DEBIAN_PYTHON.is_file():
        return f"{DEBIAN_PYTHON} (Debian's interpreter for cloud-init) is missing"
    check = subprocess.run(
        [str(DEBIAN_PYTHON), "-I", "-B", "-c", "import cloudinit.sources.helpers.openstack"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check.returncode != 0:
        return f"cloud-init does not import under {DEBIAN_PYTHON}:\n{check.stderr[-2000:]}"
    return None


class CloudInitRun:
    """One run of the client script, started at once; ``result()`` waits for its JSON. As a
    context manager it also makes sure the process is gone when the test is."""

    def __init__(self, python: Path, base: str, mac: str, work: Path, *modes: str) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.argv = [
            str(python),
            "-I",
            "-B",
            str(CLIENT),
            base,
            *modes,
            "--mac",
            mac,
            "--work",
            str(work),
        ]
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=work,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(work)},
        )
        self.seconds = 0.0

    def __enter__(self) -> CloudInitRun:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()

    def result(self) -> dict[str, Any]:
        timed_out = ""
        try:
            stdout, stderr = self.process.communicate(timeout=CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            stdout, stderr = self.process.communicate()
            timed_out = f" (killed after {CLIENT_TIMEOUT} s)"
        self.seconds = time.monotonic() - self.started
        if self.process.returncode != 0:
            pytest.fail(
                f"{' '.join(self.argv)} exited {self.process.returncode}{timed_out}\n"
                f"stderr:\n{stderr[-4000:]}\ncloud-init log:\n{self.log()[-8000:]}"
            )
        result: dict[str, Any] = json.loads(stdout)
        return result

    def log(self) -> str:
        log = self.work / "cloud-init.log"
        return log.read_text(errors="replace") if log.exists() else "(none)"


def run_cloud_init(
    python: Path, relay: Relay, guest: Guest, work: Path, *modes: str
) -> CloudInitRun:
    return CloudInitRun(python, relay.url, guest.mac, work, *modes)


def guest_relay(metadata_url: str, guest: Guest, **options: Any) -> AbstractContextManager[Relay]:
    return metadata_relay(
        metadata_url, instance_id=guest.id, tenant_id="proj", secret=SECRET, **options
    )
