"""The small pieces the bridged networks' helper processes are run and found again with: a
required program, a file replaced whole, a pid file believed only while its process lives (and
runs where it should), a process's command line."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cloudseed.compute.errors import DriverError
from cloudseed.programs.run import which


def require(program: str, package: str) -> str:
    """Where ``program`` is, or a DriverError naming the Debian package that has it."""
    found = which(program)
    if found is None:
        raise DriverError(f"bridged networks need {program} (Debian: {package})")
    return found


def write(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` whole (readers never see half of it)."""
    temporary = path.with_name(path.name + ".new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


def read_pid(path: Path) -> int | None:
    """The pid a pid file holds, None when there is none (or no such file)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def cmdline(pid: int) -> list[str]:
    """The process's argv as the kernel shows it (empty when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return False
    return state != "Z"


def running(pidfile: Path, directory: Path) -> bool:
    """Whether the process of ``pidfile`` runs in ``directory`` (so a recycled pid is not
    taken for it)."""
    pid = read_pid(pidfile)
    if pid is None or not alive(pid):
        return False
    try:
        return Path(f"/proc/{pid}/cwd").resolve() == directory.resolve()
    except OSError:
        return False


def wait_for(pidfile: Path, what: str, log_path: Path, timeout: float = 10.0) -> None:
    """Until ``what`` has written its pid file; a DriverError with its log's tail if not."""
    deadline = time.monotonic() + timeout
    while read_pid(pidfile) is None:
        if time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-400:] if log_path.exists() else ""
            raise DriverError(f"{what} did not start: {tail.strip() or 'no output'}")
        time.sleep(0.02)
