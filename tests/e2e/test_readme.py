"""The README's walkthroughs, "Try it" and "Boot a real VM", each run as written, twice.

The commands are read from README.md itself (every ``sh`` block of the section, in order), so
the README cannot drift from what works. They run in a private network, mount and PID
namespace (``unshare``): the walkthroughs' fixed ports (8774, 8775, the SSH forward) are then
this run's own whatever else listens on the machine, its ``./var`` is a temporary directory
mounted over the repository's, and whatever it leaves running ends with the namespace. It has
no network beyond its loopback, so pip is told to use what the venv already has (``make e2e``
installed it). Both runs of a section share one ``./var``: the README promises that running it
again looks up what the first run registered instead of failing on it, and that its last
command stops the service.

What "Boot a real VM" proves: a stock partitioned Debian cloud image booting through its own
GRUB gets the key and user data, the owner logs in with SSH through the forwarded port checking
the host key the guest reported, and the guest's vCPUs, memory and disk are the flavor's
(m1.small: 2 vCPUs, 1024 MiB, 4 GiB)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import BOOT_TIMEOUT, SERVE_TIMEOUT, wait_until_quiet
from tests.support.readme import (
    BOOT_A_REAL_VM,
    IMAGE,
    NAMESPACES,
    REPO,
    STOPPED_CHECK,
    TRY_IT,
    namespace_preamble,
    walkthrough,
)


def test_walkthroughs_read_the_whole_sections():
    readme = (REPO / "README.md").read_text()
    boot = walkthrough(readme, BOOT_A_REAL_VM)
    for step in ("make image-debian", "make run", "image add", "cs server ssh", "DELETE"):
        assert step in boot
    try_it = walkthrough(readme, TRY_IT)
    for step in ("make run", "image add", "md openstack/latest/user_data", "kill %1"):
        assert step in try_it


@pytest.fixture
def shared_var() -> Iterator[Path]:
    """One ``./var`` for both runs of a section."""
    (REPO / "var").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cloudseed-readme-") as var:
        yield Path(var)


def run_section(
    section: str, var: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    """The section's commands in their namespaces over ``var``, then the check that its
    last command stopped the service; the run and how long it took."""
    commands = walkthrough((REPO / "README.md").read_text(), section)
    script = "\n".join([namespace_preamble(var), commands, STOPPED_CHECK, ""])
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CLOUDSEED_") and not key.startswith("PYTEST")
    }
    started = time.monotonic()
    done = subprocess.run(
        [*NAMESPACES, "bash", "-c", script],
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, time.monotonic() - started


def report(done: subprocess.CompletedProcess[str], log: Path) -> str:
    service_log = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
    return f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-6000:]}\nlog:\n{service_log}"


def test_readme_try_it_twice(shared_var, timings):
    servers = []
    for run in ("first", "second"):
        done, seconds = run_section(TRY_IT, shared_var, timeout=SERVE_TIMEOUT + 600)
        why = f"{run} run\n" + report(done, Path("/tmp/cloudseed.log"))
        assert done.returncode == 0, why
        out = done.stdout
        # The guest's view: its user data, the user's key, and its meta_data.json.
        assert "#cloud-config\nruncmd: [echo hello from cloudseed]\n" in out, why
        public_key = Path("/tmp/demo.pub").read_text().strip()
        assert public_key in out, why
        meta = json.loads(out[out.index("{\n") : out.rindex("}") + 1])
        assert meta["name"] == "web1" and meta["public_keys"] == {"demo": public_key}, why
        servers.append(meta["uuid"])
        timings[f"README Try it ({run} run)"] = {"seconds": round(seconds, 1)}
    # The second run found the image, flavor, network and key pair and made one more server.
    assert servers[0] != servers[1]
    # (In the namespace: the cells' paths in the API database are under the repository's ./var.)
    for kind, name in (("image", "demo"), ("flavor", "m1.tiny"), ("network", "demo")):
        command = f".venv/bin/cloudseed --data-dir ./var {kind} list -f json"
        listed = subprocess.run(
            [*NAMESPACES, "bash", "-c", namespace_preamble(shared_var) + "\n" + command],
            capture_output=True,
            text=True,
        )
        assert listed.returncode == 0, listed.stderr
        assert [r["name"] for r in json.loads(listed.stdout)] == [name], listed.stdout


def test_readme_boot_a_real_vm_twice(shared_var, timings):
    if not IMAGE.exists():
        pytest.fail(f"{IMAGE} is missing: `make e2e` builds it with `make image-debian`")
    for run in ("first", "second"):
        wait_until_quiet()
        done, seconds = run_section(
            BOOT_A_REAL_VM, shared_var, timeout=SERVE_TIMEOUT + BOOT_TIMEOUT + 600
        )
        why = f"{run} run\n" + report(done, shared_var / "cloudseed.log")
        assert done.returncode == 0, why
        out = done.stdout
        # `cloudseed server ssh` names the image's login user and the forward on loopback.
        assert re.search(r"^ssh -p \d+ debian@127\.0\.0\.1$", out, re.MULTILINE), why
        # The user data ran, and the login worked with the user's key.
        assert "hello from vm1" in out, why
        # The flavor: 2 vCPUs, 1024 MiB (the kernel keeps some), a 4 GiB disk grown from 2 GiB.
        lines = out.splitlines()
        nproc = lines.index("hello from vm1") + 1
        assert lines[nproc].strip() == "2", why
        memory = re.search(r"^Mem:\s+(\d+)", out, re.MULTILINE)
        assert memory is not None and 850 <= int(memory.group(1)) <= 1024, why
        assert re.search(r"^vda\s+\S+\s+\d+\s+4G\s+0\s+disk", out, re.MULTILINE), why
        key = "README walkthrough (image cached)" if run == "first" else "README walkthrough, again"
        timings[key] = {"seconds": round(seconds, 1)}
