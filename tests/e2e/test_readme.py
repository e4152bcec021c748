"""The README's "Boot a real VM" walkthrough, run as written.

The commands are read from README.md itself (every ``sh`` block of that section, in order), so
the README cannot drift from what works. They run in a private network, mount and PID
namespace (``unshare``): the walkthrough's fixed ports (8774, 8775, the SSH forward) are then
this run's own whatever else listens on the machine, its ``./var`` is a temporary directory
mounted over the repository's, and whatever it leaves running (the service it started with
``make run``, QEMU) ends with the namespace. It has no network beyond its loopback, so pip is
told to use what the venv already has (``make e2e`` installed it).

What it proves: a stock partitioned Debian cloud image booting through its own GRUB gets the
key and user data, the owner logs in with SSH through the forwarded port, and the guest's
vCPUs, memory and disk are the flavor's (m1.small: 2 vCPUs, 1024 MiB, 4 GiB)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.e2e.harness import BOOT_TIMEOUT, SERVE_TIMEOUT, wait_until_quiet
from tests.support.readme import IMAGE, NAMESPACES, REPO, walkthrough


def test_walkthrough_reads_the_whole_section():
    commands = walkthrough((REPO / "README.md").read_text())
    for step in ("make image-debian", "make run", "image add", "cs server ssh", "DELETE"):
        assert step in commands


def namespace_preamble(var: Path) -> str:
    """What the namespace needs before the README's first command."""
    return "\n".join(
        [
            "set -e",
            "ip link set lo up",
            f"mount --bind {var} {REPO / 'var'}",
            f"cd {REPO}",
            # No index here: make run's `pip install -e .` finds everything in the venv.
            # PIP_NO_BUILD_ISOLATION=0 means "no build isolation" (pip reads the variable as
            # the value of the option's negation), so setuptools in the venv builds it.
            "export PIP_NO_INDEX=1 PIP_NO_BUILD_ISOLATION=0 PIP_DISABLE_PIP_VERSION_CHECK=1",
            "set -x",
        ]
    )


def test_readme_boot_a_real_vm(timings):
    if not IMAGE.exists():
        pytest.fail(f"{IMAGE} is missing: `make e2e` builds it with `make image-debian`")
    wait_until_quiet()
    commands = walkthrough((REPO / "README.md").read_text())
    (REPO / "var").mkdir(exist_ok=True)
    var = Path(tempfile.mkdtemp(prefix="cloudseed-readme-"))
    script = namespace_preamble(var) + "\n" + commands + "\n"
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CLOUDSEED_") and not key.startswith("PYTEST")
    }
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*NAMESPACES, "bash", "-c", script],
            env=environ,
            capture_output=True,
            text=True,
            timeout=SERVE_TIMEOUT + BOOT_TIMEOUT + 600,
        )
        seconds = time.monotonic() - started
        log = var / "cloudseed.log"
        service_log = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
    finally:
        shutil.rmtree(var, ignore_errors=True)
    report = f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-6000:]}\nlog:\n{service_log}"
    assert done.returncode == 0, report
    out = done.stdout
    # `cloudseed server ssh` names the image's login user and the forward on loopback.
    assert re.search(r"^ssh -p \d+ debian@127\.0\.0\.1$", out, re.MULTILINE), report
    # The user data ran, and the login worked with the user's key.
    assert "hello from vm1" in out, report
    # The flavor: 2 vCPUs, 1024 MiB (the kernel keeps some), a 4 GiB disk grown from 2 GiB.
    lines = out.splitlines()
    nproc = lines.index("hello from vm1") + 1
    assert lines[nproc].strip() == "2", report
    memory = re.search(r"^Mem:\s+(\d+)", out, re.MULTILINE)
    assert memory is not None and 850 <= int(memory.group(1)) <= 1024, report
    assert re.search(r"^vda\s+\S+\s+\d+\s+4G\s+0\s+disk", out, re.MULTILINE), report
    timings["README walkthrough (image cached)"] = {"seconds": round(seconds, 1)}
