"""Loopback ports for the servers tests start: never a fixed number, and never one the kernel
may give an outgoing connection.

A port the kernel picks for a bind to port 0 comes from its ephemeral range
(``net.ipv4.ip_local_port_range``), the range it also takes every outgoing connection's local
port from. Between a test picking such a port and its server binding it, any connection opened
on the machine (a database client, an HTTP client, another worker's) may take it, and the
server fails with "Address already in use" (CI, 2026-11-30: test_bridge_cleanup's API node).

So ports come from below that range, in blocks of ``BLOCK`` that one process claims with a
lock file (``fcntl.flock``, released when the process exits): two test processes (pytest-xdist
workers, make test beside make e2e, two checkouts) never hand out the same port. A process hands
each port of its blocks out once, and only when nothing listens on it at that moment. A process
forked from one that holds blocks claims blocks of its own.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

# Below the kernel's ephemeral range and above cloudseed's default SSH forwards (10022-10999),
# which the README walkthrough's `make run` takes from while the suite runs.
FIRST = 20000
BLOCK = 64
LOCKS = Path(tempfile.gettempdir()) / "cloudseed-test-ports"


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class _Blocks:
    """This process's claimed blocks and the next port of the newest."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner = -1
        self.next = 0
        self.end = 0
        self.claims: list[int] = []  # lock files held open: the claims last as long as we do

    def take(self, count: int, host: str) -> range:
        """``count`` consecutive ports of one block, each free on ``host`` now."""
        with self.lock:
            if self.owner != os.getpid():  # new, or forked: the parent's blocks are its own
                self.owner, self.next, self.end, self.claims = os.getpid(), 0, 0, []
            while True:
                if self.end - self.next < count:
                    self.next, self.end = self._claim()
                ports = range(self.next, self.next + count)
                busy = [port for port in ports if not _bindable(host, port)]
                self.next = (busy[-1] + 1) if busy else ports.stop
                if not busy:
                    return ports

    def _claim(self) -> tuple[int, int]:
        LOCKS.mkdir(exist_ok=True)
        ephemeral = ephemeral_start()
        starts = list(range(FIRST, ephemeral - BLOCK + 1, BLOCK))
        if not starts:
            raise AssertionError(
                f"no test ports: the kernel's ephemeral range starts at {ephemeral}, "
                f"below {FIRST + BLOCK} (net.ipv4.ip_local_port_range)"
            )
        random.shuffle(starts)  # processes starting together do not all try the same block
        for start in starts:
            fd = os.open(LOCKS / f"{start}.lock", os.O_CREAT | os.O_RDWR, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.claims.append(fd)
            return start, start + BLOCK
        raise AssertionError(f"every block of test ports from {FIRST} is claimed ({LOCKS})")


_BLOCKS = _Blocks()


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, which no other test process is given and no outgoing
    connection can take (the module's docstring). Tests that can pass port 0 to the server
    itself should."""
    return _BLOCKS.take(1, host).start


def free_port_range(size: int = 8, host: str = "127.0.0.1") -> range:
    """``size`` consecutive ports free on ``host`` now (at most ``BLOCK``), as ``free_port``."""
    if not 0 < size <= BLOCK:
        raise ValueError(f"a range of 1 to {BLOCK} ports, not {size}")
    return _BLOCKS.take(size, host)
