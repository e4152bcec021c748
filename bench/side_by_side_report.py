"""The pure half of bench/side_by_side.py: results, the ratio table and the charts.

No sockets or processes here (the charts are written to files), so the smoke test
(tests/unit/test_bench_side_by_side.py) runs it on made-up numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CLOUDSEED = "cloudseed"
NGINX = "nginx (static files)"


@dataclass(frozen=True)
class Measurement:
    """One target's best round in one scenario. ``rps`` is None for sequential medians."""

    scenario: str
    target: str
    rps: float | None
    p50_ms: float
    p99_ms: float
    errors: int = 0
    note: str = ""


def by_scenario(results: Iterable[Measurement]) -> dict[str, list[Measurement]]:
    grouped: dict[str, list[Measurement]] = {}
    for result in results:
        grouped.setdefault(result.scenario, []).append(result)
    return grouped


def best_nova(results: list[Measurement]) -> Measurement | None:
    """Nova's best server in a scenario: most requests/s, else the lowest median."""
    nova = [r for r in results if r.target.startswith("Nova")]
    if not nova:
        return None
    if all(r.rps is not None for r in nova):
        return max(nova, key=lambda r: r.rps or 0.0)
    return min(nova, key=lambda r: r.p50_ms)


def ratio(ours: Measurement, theirs: Measurement) -> float:
    """How many times better cloudseed is: throughput ratio, or latency ratio when there is no
    throughput (sequential requests)."""
    if ours.rps is not None and theirs.rps is not None:
        return ours.rps / theirs.rps if theirs.rps else float("inf")
    return theirs.p50_ms / ours.p50_ms if ours.p50_ms else float("inf")


def _rps(m: Measurement) -> str:
    return "—" if m.rps is None else f"{m.rps:,.0f}"


def results_table(results: list[Measurement]) -> str:
    lines = [
        "| scenario | target | req/s | p50 ms | p99 ms | errors | note |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.target} | {_rps(r)} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
            f"{r.errors:,} | {r.note} |"
        )
    return "\n".join(lines)


def goal_of(scenario: str, goals: dict[str, str]) -> str:
    """The goal whose key the scenario's name starts with (the longest such key), or ""."""
    keys = [key for key in goals if scenario.startswith(key)]
    return goals[max(keys, key=len)] if keys else ""


def ratio_table(results: list[Measurement], goals: dict[str, str]) -> str:
    """cloudseed against Nova's best server (and nginx where it ran), per scenario."""
    lines = [
        "| scenario | cloudseed | Nova's best | vs Nova | nginx | % of nginx | goal |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for scenario, rows in by_scenario(results).items():
        ours = next((r for r in rows if r.target == CLOUDSEED), None)
        nova = best_nova(rows)
        if ours is None or nova is None:
            continue
        nginx = next((r for r in rows if r.target == NGINX), None)
        unit = (
            (lambda m: f"{_rps(m)} req/s")
            if ours.rps is not None
            else (lambda m: f"{m.p50_ms:.1f} ms")
        )
        of_nginx = (
            f"{100 * ours.rps / nginx.rps:.0f} %"
            if nginx is not None and nginx.rps and ours.rps is not None
            else "—"
        )
        lines.append(
            f"| {scenario} | {unit(ours)} | {unit(nova)} ({nova.target}) | "
            f"{ratio(ours, nova):.1f}x | {unit(nginx) if nginx else '—'} | {of_nginx} | "
            f"{goal_of(scenario, goals)} |"
        )
    return "\n".join(lines)


def colour(target: str) -> str:
    if target.startswith(CLOUDSEED):  # cloudseed's servers (the Nova drop-in's too): blue
        return "#2b7bba"
    if target == NGINX:
        return "#8c8c8c"
    return "#f4a261" if "uwsgi" in target else "#d95f02"  # Nova's servers: oranges


def write_chart(results: list[Measurement], path: Path, title: str) -> Path:
    """Two panels of horizontal bars, one bar per target, grouped by scenario: requests/s
    and p99 latency, both on log scales. Sequential scenarios (no requests/s) show their median
    latency in the right panel instead, marked so. Written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import NullFormatter

    grouped = by_scenario(results)
    order = list(dict.fromkeys(r.target for r in results))
    order.sort(
        key=lambda t: (not t.startswith(CLOUDSEED), t == NGINX, t)
    )  # cloudseed, Nova..., nginx
    bars = sum(len(v) for v in grouped.values()) + len(grouped) - 1
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 1.6 + 0.3 * bars), sharey=True, constrained_layout=True
    )
    ticks: list[float] = []
    names: list[str] = []
    y = 0.0
    for scenario, entries in grouped.items():
        entries = sorted(entries, key=lambda e: order.index(e.target))
        ticks.append(y + (len(entries) - 1) / 2)
        names.append(scenario)
        for entry in entries:
            if entry.rps is not None:
                left.barh(y, entry.rps, color=colour(entry.target))
                left.text(entry.rps, y, f" {entry.rps:,.0f}", va="center", fontsize=7)
                value, suffix = entry.p99_ms, ""
            else:
                value, suffix = entry.p50_ms, " ms median (sequential)"
            right.barh(y, value, color=colour(entry.target), hatch="//" if suffix else None)
            right.text(value, y, f" {value:,.1f}{suffix}", va="center", fontsize=7)
            y += 1
        y += 1
    left.set_yticks(ticks, names, fontsize=8)
    left.invert_yaxis()
    for axis, label in (
        (left, "requests/s (log scale; more is better)"),
        (right, "p99 latency, ms (log scale; less is better)"),
    ):
        axis.set_xscale("log")
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel(label)
        axis.margins(x=0.25)
    fig.legend(
        handles=[Patch(color=colour(t), label=t) for t in order],
        loc="outside lower center",
        ncol=len(order),
        fontsize=8,
    )
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
