"""Bounded console logs for the qemu driver, as virtlogd bounds a Nova/libvirt guest's.

QEMU appends the serial console to ``console.log`` (``-chardev file,append=on`` opens it with
``O_APPEND``, so once the file is truncated QEMU's next write lands at its start). A thread of
the driver looks at every instance's log each ``interval`` seconds, and rotates one larger than
``max_size`` once, as virtlogd does with its ``max_size`` (2 MiB) and ``max_backups = 1``: the
log's last ``max_size`` bytes are copied to ``console.log.0`` (replacing the previous one), then
the log is truncated ("copytruncate"). A guest's console therefore takes at most about
``2 x max_size`` on the host's disk, plus what the guest prints in one interval. Bytes the guest
writes between the copy and the truncation (a few microseconds) are lost.

Every worker process of the service may run the thread: a rotation holds an exclusive ``flock``
on the log and checks its size again under it; a reader holds a shared one, so it sees the two
files either before or after a rotation, never half-way.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from cloudseed.periodic import Periodic

log = logging.getLogger(__name__)

LOG_NAME = "console.log"
BACKUP_SUFFIX = ".0"
_CHUNK = 1 << 20


def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


@contextlib.contextmanager
def _locked(path: Path, operation: int) -> Iterator[int | None]:
    """The log's descriptor, locked; None if there is no log, or (non-blocking) it is busy."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)  # releases the lock


def rotate(path: Path, max_size: int) -> bool:
    """Rotate the log if it is larger than ``max_size`` bytes; whether it was."""
    if max_size <= 0:
        return False
    with _locked(path, fcntl.LOCK_EX | fcntl.LOCK_NB) as fd:
        if fd is None:
            return False
        size = os.fstat(fd).st_size
        if size <= max_size:
            return False
        partial = path.with_name(path.name + BACKUP_SUFFIX + ".tmp")
        with partial.open("wb") as out:
            offset = size - max_size
            while chunk := os.pread(fd, min(_CHUNK, max_size), offset):
                out.write(chunk)
                offset += len(chunk)
                if offset >= size + max_size:  # a guest outrunning the copy: enough
                    break
            os.ftruncate(fd, 0)
        os.replace(partial, backup_of(path))
        return True


def _tail(fd: int, limit: int) -> bytes:
    size = os.fstat(fd).st_size
    start = max(0, size - limit)
    return os.pread(fd, size - start, start) if size > start else b""


def read_tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes the guest printed, across the rotated log and the current one."""
    with _locked(path, fcntl.LOCK_SH) as fd:
        if fd is None:
            return b""
        current = _tail(fd, limit)
        if len(current) >= limit:
            return current
        try:
            backup = os.open(backup_of(path), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return current
        try:
            return _tail(backup, limit - len(current)) + current
        finally:
            os.close(backup)


class ConsoleLogRotator:
    """The thread that keeps every instance's ``console.log`` under ``root`` bounded."""

    def __init__(self, root: Path, *, max_size: int, interval: float = 1.0) -> None:
        self.root = root
        self.max_size = max_size
        self._loop = Periodic(
            self.run_once,
            interval=interval,
            name="console-log-rotator",
            failure="console log rotation: pass failed",
            first_pass_at_once=False,
        )

    @property
    def interval(self) -> float:
        """Seconds between passes (a change applies from the next wait)."""
        return self._loop.interval

    @interval.setter
    def interval(self, seconds: float) -> None:
        self._loop.interval = seconds

    def start(self) -> None:
        """Start the thread (once; again after ``stop``). Nothing to do without a bound."""
        if self.max_size > 0:
            self._loop.start()

    def stop(self) -> None:
        self._loop.stop(timeout=None)

    def run_once(self) -> int:
        """Rotate what needs it; how many logs were rotated."""
        rotated = 0
        try:
            logs = sorted(self.root.glob(f"*/{LOG_NAME}"))
        except OSError:
            return 0
        for path in logs:
            try:
                if rotate(path, self.max_size):
                    rotated += 1
                    log.debug("console log %s passed %d bytes: rotated", path, self.max_size)
            except OSError:
                log.exception("could not rotate console log %s", path)
        return rotated
