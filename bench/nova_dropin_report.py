"""The pure half of bench/nova_dropin.py: the drop-in against issue 31's targets (10x Nova's
best server warm, 30x in the boot storms, p99 under 10 ms), the idle queries per node, and the
tables and chart of its docs/benchmarks.md section. No sockets or processes here
(tests/unit/test_bench_nova_dropin.py runs it on made-up numbers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from side_by_side_report import NGINX, Measurement, best_nova, by_scenario, write_chart

DROPIN = "cloudseed nova-metadata"
WARM_GOAL = 10.0  # times Nova's best server, one warm guest
STORM_GOAL = 30.0  # times Nova's best server, in a boot storm (cold or just gone ACTIVE)
P99_GOAL_MS = 10.0
STORM_PREFIX = "boot storm"


def warm_scenario(connections: int) -> str:
    return f"one warm guest, {connections} conn."


def storm_scenario(
    guests: int, connections: int, *, just_active: bool = False, first_contacts: bool = False
) -> str:
    """A boot storm's name: ``just_active``, the instances went ACTIVE after the servers
    started (bench/nova_dropin_storms.py), else cold (nothing cached, nothing heard);
    ``first_contacts``: cold, and the drop-in's host wake-up off too, so that every guest's
    first request waits for its own load."""
    what = "just gone ACTIVE" if just_active else "cold"
    if first_contacts:
        what = "cold, first contacts only"
    return f"{STORM_PREFIX}, {guests:,} guests, {what}, {connections} conn."


def goal(scenario: str) -> float:
    return STORM_GOAL if scenario.startswith(STORM_PREFIX) else WARM_GOAL


@dataclass(frozen=True)
class Verdict:
    scenario: str
    dropin: Measurement
    nova: Measurement | None  # Nova's best server in the scenario, when it ran there
    nginx: Measurement | None  # the machine's ceiling, when it ran there

    @property
    def ratio(self) -> float | None:
        if self.nova is None:
            return None
        theirs = self.nova.rps or 0.0
        return (self.dropin.rps or 0.0) / theirs if theirs else float("inf")

    @property
    def goal(self) -> float:
        return goal(self.scenario)

    @property
    def ratio_met(self) -> bool | None:
        return None if self.ratio is None else self.ratio >= self.goal

    @property
    def p99_met(self) -> bool:
        return self.dropin.p99_ms < P99_GOAL_MS


def verdicts(results: list[Measurement]) -> list[Verdict]:
    """One per scenario where the drop-in was measured."""
    found = []
    for scenario, rows in by_scenario(results).items():
        ours = next((r for r in rows if r.target.startswith(DROPIN)), None)
        if ours is not None:
            nginx = next((r for r in rows if r.target == NGINX), None)
            found.append(Verdict(scenario, ours, best_nova(rows), nginx))
    return found


def _mark(met: bool | None) -> str:
    return "—" if met is None else "met" if met else "**missed**"


def _rps(m: Measurement | None) -> str:
    return "—" if m is None else f"{m.rps or 0:,.0f}"


def targets_table(results: list[Measurement]) -> str:
    lines = [
        "| scenario | drop-in req/s | Nova's best req/s | ratio | target | drop-in p99 | "
        f"p99 < {P99_GOAL_MS:g} ms | nginx, static: the machine's ceiling |",
        "|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for v in verdicts(results):
        nova = "—" if v.nova is None else f"{_rps(v.nova)} ({v.nova.target})"
        ratio = "—" if v.ratio is None else f"{v.ratio:.1f}x"
        target = "—" if v.nova is None else f"{v.goal:g}x: {_mark(v.ratio_met)}"
        lines.append(
            f"| {v.scenario} | {_rps(v.dropin)} | {nova} | {ratio} | {target} | "
            f"{v.dropin.p99_ms:.2f} ms | {_mark(v.p99_met)} | {_rps(v.nginx)} |"
        )
    return "\n".join(lines)


# --- idle ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Idle:
    """Two idle windows (bench/nova_dropin_queries.py). Transactions per second by database
    name (PostgreSQL only; empty elsewhere); the drop-in's statements per second by worker
    (pid) and database name; ``labels``: database name -> Nova's label (api, cell1, ...)."""

    seconds: float
    labels: dict[str, str]
    nova_transactions: dict[str, float]
    with_dropin_transactions: dict[str, float]
    statements: dict[int, dict[str, float]]


def per_second(before: dict[str, int], after: dict[str, int], seconds: float) -> dict[str, float]:
    """Counter deltas per second; a counter absent before counts from 0."""
    return {name: (count - before.get(name, 0)) / seconds for name, count in after.items()}


def statements_per_worker(
    before: dict[int, dict[str, int]], after: dict[int, dict[str, int]], seconds: float
) -> dict[int, dict[str, float]]:
    """Per process that sent any statement in the window: its statements per second by
    database (a process with none, the supervisor, is no worker of this)."""
    rates: dict[int, dict[str, float]] = {}
    for pid, counts in after.items():
        rate = per_second(before.get(pid, {}), counts, seconds)
        if any(value > 0 for value in rate.values()):
            rates[pid] = {name: value for name, value in rate.items() if value > 0}
    return rates


@dataclass(frozen=True)
class IdleRow:
    database: str  # Nova's label (api, cell1, ...) or the database's name
    nova: float | None  # transactions/s, Nova's servers alone
    both: float | None  # transactions/s, with the drop-in too
    statements: float  # the drop-in's statements/s per worker

    @property
    def dropin(self) -> float | None:
        """The drop-in's transactions/s: the second window's less the first's."""
        return None if self.nova is None or self.both is None else self.both - self.nova


def idle_rows(idle: Idle) -> list[IdleRow]:
    """Per database (Nova's in the order api, cell0, cell1, cell2, then any other the drop-in
    sent statements to); statements per worker are the workers' mean."""
    workers = max(1, len(idle.statements))
    names = sorted(
        set(idle.labels)
        | set(idle.nova_transactions)
        | {name for rates in idle.statements.values() for name in rates},
        key=lambda n: idle.labels.get(n, "~" + n),
    )
    return [
        IdleRow(
            idle.labels.get(name, name),
            idle.nova_transactions.get(name),
            idle.with_dropin_transactions.get(name),
            sum(rates.get(name, 0.0) for rates in idle.statements.values()) / workers,
        )
        for name in names
    ]


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def idle_table(idle: Idle) -> str:
    rows = idle_rows(idle)
    lines = [
        "| database | transactions/s, Nova's servers alone | transactions/s, with the "
        "drop-in | the drop-in's transactions/s | the drop-in's statements/s per worker "
        f"({len(idle.statements)} workers) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.database} | {_number(row.nova)} | {_number(row.both)} | "
            f"{_number(row.dropin)} | {row.statements:.2f} |"
        )
    totals = (
        _total([r.nova for r in rows]),
        _total([r.both for r in rows]),
        _total([r.dropin for r in rows]),
        sum(r.statements for r in rows),
    )
    lines.append("| **all** | " + " | ".join(f"**{_number(t)}**" for t in totals) + " |")
    return "\n".join(lines)


def chart(results: list[Measurement], path: Path, title: str) -> Path:
    return write_chart(results, path, title)
