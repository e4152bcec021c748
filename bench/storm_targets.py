"""The metadata storm's targets and the table that holds a run's results against them: the
first table of its section in docs/benchmarks.md, whose unmet rows the verdict under it names.
Each row is built from the ``Report`` (storm_results) by one of the builders below, which
``targets_table`` joins in the table's order: the targets of every run, the one measured while
servers are built, then the ones against nginx, each only when its passes were run."""

from __future__ import annotations

from storm_results import Report, kib_per_instance, visibility_ms
from storm_wrk import best

TARGETS = {
    "rps": 10_000,
    "p99_ms": 10.0,
    "kib_per_instance": 5.0,
    "visible_ms": 100.0,
    "nginx_ratio": 0.30,
    "storm_nginx_ratio": 0.50,  # issue 36: the boot storm, against nginx's warm pass
}

Row = tuple[str, str, str, bool]  # target, goal, measured, met


def targets_table(report: Report) -> tuple[str, list[str]]:
    rows = [*_base_rows(report), *_building_rows(report), *_nginx_rows(report)]
    lines = ["| Target | Goal | Measured | Met |", "|---|---:|---:|---|"]
    lines += [
        f"| {what} | {goal} | {got} | {'met' if ok else '**not met**'} |"
        for what, goal, got, ok in rows
    ]
    missed = [what for what, _, _, ok in rows if not ok]
    return "\n".join(lines), missed


def _base_rows(report: Report) -> list[Row]:
    """The targets every run measures: throughput, latency, errors, memory, visibility."""
    warm, cold = best(report.warm), report.cold
    assert cold is not None
    storm_errors = cold.errors + sum(r.errors for r in [*report.warm, report.paced] if r)
    visible = max(visibility_ms(report))
    kib = kib_per_instance(report)
    return [
        (
            "requests/s over the cloud-init mix, all workers (warm)",
            f"≥ {TARGETS['rps']:,}",
            f"{warm.rps:,.0f}",
            warm.rps >= TARGETS["rps"],
        ),
        # Two readings of "p99 at 256 connections". At the target load (10,000 requests/s
        # offered through 256 connections, the paced pass) it is a latency target. Saturated
        # (closed loop: each connection sends its next request when the last is answered) the
        # mean latency is connections / throughput (Little's law), so it asks for more than
        # 25,600 requests/s, which nginx itself does not reach with a p99 under 10 ms here.
        *(
            [
                (
                    f"p99 latency at {report.args.connections} connections, "
                    f"{report.args.paced_rate:,} requests/s offered",
                    f"< {TARGETS['p99_ms']:.0f} ms",
                    f"{report.paced.latency_us['p99'] / 1000:.2f} ms "
                    f"({report.paced.rps:,.0f} requests/s served)",
                    report.paced.latency_us["p99"] / 1000 < TARGETS["p99_ms"],
                )
            ]
            if report.paced
            else []
        ),
        (
            f"p99 latency at {report.args.connections} connections, saturated (closed loop)"
            + (
                f"; nginx: {best(report.nginx).latency_us['p99'] / 1000:.1f} ms"
                if report.nginx
                else ""
            ),
            f"< {TARGETS['p99_ms']:.0f} ms",
            f"{warm.latency_us['p99'] / 1000:.2f} ms",
            warm.latency_us["p99"] / 1000 < TARGETS["p99_ms"],
        ),
        (
            f"errors over the {report.args.instances:,}-instance storm (cold + warm passes)",
            "0",
            f"{storm_errors:,}",
            storm_errors == 0,
        ),
        (
            "memory per cached instance (RSS growth of the worker that grew most)",
            f"< {TARGETS['kib_per_instance']:.0f} KB",
            f"{kib:.2f} KiB",
            kib < TARGETS["kib_per_instance"],
        ),
        (
            "change visible in every worker",
            f"≤ {TARGETS['visible_ms']:.0f} ms",
            f"{visible:.1f} ms (max of {len(report.changes)})",
            visible <= TARGETS["visible_ms"],
        ),
    ]


def _building_rows(report: Report) -> list[Row]:
    """The paced pass while servers are built, when it was run (none or one row)."""
    quiet, busy = report.paced, report.paced_building
    if quiet is None or busy is None or report.building is None:
        return []
    # Issue 36: the storm unharmed by builds on the same nodes. wrk's paced load waits
    # for each answer, so a slower server is offered less: the requests/s served beside
    # the quiet pass's says how much of the load was kept.
    return [
        (
            f"p99 latency at {report.args.paced_rate:,} requests/s offered while "
            f"{report.building.servers:,} servers are created and built ("
            + (
                "the agents in the same workers"
                if report.args.apart is None
                else f"metadata apart, API and agent at niceness {report.args.apart}"
            )
            + ")",
            f"< {TARGETS['p99_ms']:.0f} ms, no errors",
            f"{busy.latency_us['p99'] / 1000:.2f} ms ({busy.rps:,.0f} requests/s served, "
            f"{quiet.rps:,.0f} without builds; {busy.errors:,} errors)",
            busy.latency_us["p99"] / 1000 < TARGETS["p99_ms"] and busy.errors == 0,
        )
    ]


def _nginx_rows(report: Report) -> list[Row]:
    """cloudseed's requests/s against nginx's, warm and in the boot storm, when nginx ran."""
    if not report.nginx:
        return []
    ceiling = best(report.nginx).rps
    ratio = best(report.warm).rps / ceiling
    rows = [
        (
            "cloudseed / nginx requests/s",
            f"≥ {TARGETS['nginx_ratio']:.0%}",
            f"{ratio:.1%}",
            ratio >= TARGETS["nginx_ratio"],
        )
    ]
    cold = report.cold
    assert cold is not None
    if report.just_built is not None:
        # Issue 36: the boot storm near the warm one. Its guests' first requests, as they
        # come after their builds: loaded ahead. The cold pass (a restart long after the
        # boots: every guest a first contact) is beside it, for the record.
        rows.append(
            (
                f"boot storm of the {len(report.building.created if report.building else []):,} "
                "guests just built (loaded ahead) / nginx requests/s",
                f"≥ {TARGETS['storm_nginx_ratio']:.0%}",
                f"{report.just_built.rps / ceiling:.1%} ({report.just_built.rps:,.0f} req/s; "
                f"cold pass: {cold.rps / ceiling:.1%})",
                report.just_built.rps / ceiling >= TARGETS["storm_nginx_ratio"],
            )
        )
    return rows
