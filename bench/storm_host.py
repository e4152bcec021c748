"""The machine a benchmark runs on: the programs it needs (Debian's, or the venv's), a free
loopback port (the test suite's: tests/support/ports.py), the load average, and progress lines
timed with it."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The repository's root, for tests.support: a benchmark is started as `python bench/NAME.py`,
# which puts only bench/ on the path.
REPOSITORY = str(Path(__file__).resolve().parents[1])
if REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

# A kernel-chosen port (a bind to port 0) comes from the range every outgoing connection's
# local port is taken from, and a connection could take it before the server bound it.
from tests.support.ports import free_port as free_port  # noqa: E402  (re-exported)


def step(message: str) -> Callable[[], float]:
    """Print what starts; the returned function prints and returns the seconds it took."""
    started = time.perf_counter()
    print(f"{message} ...", flush=True)

    def done() -> float:
        elapsed = time.perf_counter() - started
        print(f"  ({elapsed:.1f} s, load average {load_average()})", flush=True)
        return elapsed

    return done


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (/proc/stat's first line)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def wait_until_idle(
    *, busy_below: float = 0.15, interval: float = 0.5, at_most: float = 60.0
) -> float:
    """Wait until the machine's CPUs were busy less than ``busy_below`` of an ``interval``
    (a server still working off the requests of a load generator that stopped, say: Nova's
    workers answer the cold storm's pending requests for seconds after wrk has gone); at
    most ``at_most`` seconds. The seconds waited."""
    started = time.monotonic()
    busy, total = _cpu_ticks()
    while time.monotonic() - started < at_most:
        time.sleep(interval)
        busy_now, total_now = _cpu_ticks()
        share = (busy_now - busy) / max(1, total_now - total)
        busy, total = busy_now, total_now
        if share < busy_below:
            break
    return time.monotonic() - started


def require_tool(name: str, debian_package: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        sys.exit(f"{name} is missing: apt-get install {debian_package}")
    return found


def venv_tool(name: str, hint: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        sys.exit(f"{name} is missing: {hint}")
    return found
