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
            f"{goals.get(scenario, '')} |"
        )
    return "\n".join(lines)


COLOURS = {CLOUDSEED: "#2b7bba", NGINX: "#7f7f7f"}
NOVA_COLOURS = ("#d95f02", "#f4a261", "#e76f51")


def _colour(target: str, nova_seen: list[str]) -> str:
    if target in COLOURS:
        return COLOURS[target]
    if target not in nova_seen:
        nova_seen.append(target)
    return NOVA_COLOURS[nova_seen.index(target) % len(NOVA_COLOURS)]


def write_chart(results: list[Measurement], path: Path, title: str) -> Path:
    """Two horizontal bar panels, requests/s (log scale) and p99 ms, one bar per target per
    scenario; sequential scenarios (no req/s) show their median instead, in the p99 panel's
    unit. Written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    grouped = by_scenario(results)
    targets = list(dict.fromkeys(r.target for r in results))
    rows = sum(len(v) for v in grouped.values()) + len(grouped)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(12, 1.2 + 0.28 * rows), sharey=True, constrained_layout=True
    )
    labels: list[str] = []
    positions: list[float] = []
    y = 0.0
    nova_seen: list[str] = []
    drawn: set[str] = set()
    for scenario, entries in grouped.items():
        for entry in sorted(entries, key=lambda e: targets.index(e.target)):
            colour = _colour(entry.target, nova_seen)
            label = entry.target if entry.target not in drawn else None
            drawn.add(entry.target)
            if entry.rps is not None:
                left.barh(y, entry.rps, color=colour, label=label)
                left.text(entry.rps, y, f" {entry.rps:,.0f}", va="center", fontsize=7)
                value, suffix = entry.p99_ms, ""
            else:
                value, suffix = entry.p50_ms, " (median)"
            right.barh(y, value, color=colour)
            right.text(value, y, f" {value:.1f}{suffix}", va="center", fontsize=7)
            labels.append(f"{scenario}  [{entry.target}]" if entry is entries[0] else "")
            positions.append(y)
            y += 1
        y += 1
    left.set_yticks(positions, [lbl.split("  [")[0] for lbl in labels], fontsize=8)
    left.invert_yaxis()
    left.set_xscale("log")
    left.set_xlabel("requests/s (log scale; more is better)")
    right.set_xscale("log")
    right.set_xlabel("p99 latency, ms (log scale; less is better)")
    left.legend(loc="lower right", fontsize=8)
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
