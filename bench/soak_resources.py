"""The processes' memory, descriptors and threads over the soak, and their judgement.

- **Memory**: for each process that lived the whole run (the serve parents, the first worker
  of each node, the first agent), its RSS at the end of warm-up and at the end of the load,
  and the least-squares slope of its samples in between. Growth over the plan's allowance
  (``Plan.memory_allowance_mib``) or ``MEMORY_ALLOWANCE_SHARE`` of the warm RSS, whichever is
  larger, plus ``CONNECTION_KIB`` for each socket it holds beyond what it held at warm-up,
  fails the run. The sockets are allowed for because a worker's connections are not its own
  to choose: each SIGKILL of the other worker of its node sends that worker's clients (the
  waiting long-polls) to reconnect, and the kernel gives the survivor about half of them.
  Processes killed by the chaos loop are reported per incarnation (pid, lifetime, RSS first
  and last), not judged: none lives long enough.
- **Threads**: after warm-up no process may have more than ``THREAD_SLACK`` threads over the
  most it had during warm-up. The serve workers' thread pools follow the load: anyio starts a
  worker thread for each blocking call running at once (up to 40) and drops the idle ones only
  when a later call comes, 10 s on, so the count moves in a band; a leak climbs out of it.
- **Descriptors**: compared in two quiet moments, before the load started and after it ended
  with every client gone: client connections must be back to none, files, pipes and
  non-TCP sockets back to what they were (one more is allowed: a file opened once on first
  use), database connections within the pools' bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from soak_processes import Sample

MEMORY_ALLOWANCE_SHARE = 0.05
# RSS per waiting long-poll connection, measured with 10,000 of them (docs/benchmarks.md,
# "Long-polls: 10,000 guests waiting for a change": 20,770-20,856 bytes).
CONNECTION_KIB = 21
THREAD_SLACK = 8
# Two engines (API and cell database) of pool_size 10 and 10 overflow each, plus the change
# feed's LISTEN connection: what one process may hold at most (src/cloudseed/db/engines.py).
DATABASE_CONNECTIONS_BOUND = 2 * 20 + 2


@dataclass(frozen=True)
class Incarnation:
    role: str
    pid: int
    first: Sample
    last: Sample
    warm: Sample | None  # the first sample at or after the end of warm-up
    warm_threads: int  # the most threads it had until the end of warm-up
    later_threads: int  # the most after
    most_fds: int
    slope_kib_per_minute: float | None

    whole_run: bool  # there before the load started and at its end: never killed

    @property
    def growth_kib(self) -> int | None:
        return None if self.warm is None else self.last.usage.rss_kib - self.warm.usage.rss_kib

    @property
    def socket_growth(self) -> int:
        return 0 if self.warm is None else self.last.usage.sockets - self.warm.usage.sockets

    def allowed_kib(self, allowance_mib: float) -> float:
        """The growth this process may show after warm-up."""
        base = self.warm.usage.rss_kib if self.warm is not None else 0
        return max(allowance_mib * 1024, MEMORY_ALLOWANCE_SHARE * base) + CONNECTION_KIB * max(
            0, self.socket_growth
        )


def _slope(samples: list[Sample]) -> float | None:
    if len(samples) < 3:
        return None
    xs = [(s.at - samples[0].at) / 60 for s in samples]
    ys = [float(s.usage.rss_kib) for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else None


def incarnations(
    samples: list[Sample], load_start: float, warm_end: float, load_end: float
) -> list[Incarnation]:
    """Each process's series, from the samples up to the end of the load."""
    by_pid: dict[tuple[str, int], list[Sample]] = {}
    for sample in samples:
        if sample.at <= load_end:
            by_pid.setdefault((sample.role, sample.pid), []).append(sample)
    last_round = max((s.at for s in samples if s.at <= load_end), default=load_end)
    found = []
    for (role, pid), series in sorted(by_pid.items(), key=lambda kv: (kv[0][0], kv[1][0].at)):
        after = [s for s in series if s.at >= warm_end]
        before = [s for s in series if s.at < warm_end]
        found.append(
            Incarnation(
                role=role,
                pid=pid,
                first=series[0],
                last=series[-1],
                warm=after[0] if after and before else None,
                warm_threads=max((s.usage.threads for s in before), default=0),
                later_threads=max((s.usage.threads for s in after), default=0),
                most_fds=max(s.usage.fds for s in series),
                slope_kib_per_minute=_slope(after) if before else None,
                whole_run=series[0].at <= load_start and series[-1].at >= last_round,
            )
        )
    return found


def memory_faults(found: list[Incarnation], allowance_mib: float) -> list[str]:
    faults = []
    for inc in found:
        if not inc.whole_run or inc.warm is None or inc.growth_kib is None:
            continue
        allowed = inc.allowed_kib(allowance_mib)
        if inc.growth_kib > allowed:
            faults.append(
                f"{inc.role} (pid {inc.pid}) grew {inc.growth_kib / 1024:.1f} MiB after warm-up "
                f"(from {inc.warm.usage.rss_kib / 1024:.1f} MiB, {inc.socket_growth:+d} "
                f"sockets; allowed {allowed / 1024:.1f} MiB)"
            )
        if inc.later_threads > inc.warm_threads + THREAD_SLACK:
            faults.append(
                f"{inc.role} (pid {inc.pid}) went from {inc.warm_threads} threads during "
                f"warm-up to {inc.later_threads} after it"
            )
    return faults


Quiet = dict[str, tuple[int, Counter[str]]]  # role -> (pid, descriptors by kind)


def series(
    samples: list[Sample], role: str, pid: int, start: float, end: float, points: int = 11
) -> list[int]:
    """The process's RSS (KiB) at ``points`` moments evenly spread over [start, end]: the
    last sample taken at or before each."""
    own = [s for s in samples if s.role == role and s.pid == pid]
    found = []
    for i in range(points):
        moment = start + (end - start) * i / (points - 1)
        before = [s for s in own if s.at <= moment + 0.5]
        found.append(before[-1].usage.rss_kib if before else 0)
    return found


def descriptor_faults(before: Quiet, after: Quiet) -> list[str]:
    """Faults of the processes seen in both quiet moments (a process that replaced a killed one
    is compared with nothing: it was not there before the load)."""
    faults = []
    for role, (pid, now) in sorted(after.items()):
        if now["client"]:
            faults.append(
                f"{role}: {now['client']} client connections left after every client closed"
            )
        if now["database"] > DATABASE_CONNECTIONS_BOUND:
            faults.append(f"{role}: {now['database']} database connections")
        if role not in before or before[role][0] != pid:
            continue
        then = before[role][1]
        for kind in ("file", "other socket", "listening"):
            if now[kind] > then[kind] + (1 if kind == "file" else 0):
                faults.append(
                    f"{role}: {kind} descriptors {then[kind]} before the load, {now[kind]} after"
                )
    return faults
