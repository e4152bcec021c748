"""The machine a benchmark runs on: the programs it needs (Debian's, or the venv's), a free
loopback port, the load average, and progress lines timed with it."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
