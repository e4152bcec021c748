"""CPU time per request on each side of a load test: the load generator's (the finished child
processes' rusage) and the server's (its processes' ticks in /proc), so that what a client's
Lua script costs on shared cores is told apart from what the server spends."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """Seconds of CPU ``pid`` has used (user + system), 0 if it is gone."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    return 0.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pids_matching(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (a server's own prefix or port)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def group_pids(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.getpgid(int(entry.name)) == pgid:
                    found.append(int(entry.name))
    return found


@dataclass
class CpuUse:
    client_s: float = 0.0
    server_s: float | None = None

    def per_request_us(self, requests: int) -> tuple[float, float | None]:
        if requests <= 0:
            return 0.0, None
        server = None if self.server_s is None else self.server_s / requests * 1e6
        return self.client_s / requests * 1e6, server


@contextlib.contextmanager
def metered(server_pids: Callable[[], list[int]] | None) -> Iterator[CpuUse]:
    """Measure the load generator run inside (a child process, waited for) and the server's
    processes (``server_pids()``, asked before and after)."""
    use = CpuUse()
    pids = server_pids() if server_pids is not None else []
    server_before = sum(process_cpu(p) for p in pids)
    client_before = _children_cpu()
    yield use
    use.client_s = _children_cpu() - client_before
    if server_pids is not None:
        use.server_s = sum(process_cpu(p) for p in pids) - server_before


def with_children(pids: list[int]) -> list[int]:
    """``pids`` and their children (nginx's master and its workers, whose command lines do
    not name the master's prefix)."""
    found = list(pids)
    for pid in pids:
        with contextlib.suppress(OSError):
            found += [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return found
