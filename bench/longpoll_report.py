"""bench/longpoll.py's results: what each phase measured (Phase, Report) and the Markdown
section written from them into docs/benchmarks.md."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from collections import Counter
from dataclasses import dataclass, field

from report import code_version, cpu_model, percentile


@dataclass
class Phase:
    rss_kib: dict[str, int]  # parent, worker 1, worker 2 ...
    cpu: dict[str, float]  # share of one core over the idle window


@dataclass
class Report:
    database: str = "sqlite"
    guests: int = 0
    seeded: int = 0
    seeding_seconds: float = 0.0
    fd_limit: tuple[int, int] = (0, 0)
    connect_seconds: float = 0.0
    per_worker: dict[str, int] = field(default_factory=dict)
    idle: Phase | None = None
    waiting: Phase | None = None
    single: list[tuple[float, float]] = field(default_factory=list)  # ms: from PUT start, answer
    woken_others: int = 0
    put_ms: float = 0.0
    fan_out: list[float] = field(default_factory=list)  # ms after the PUT's answer, sorted
    statuses: Counter[int] = field(default_factory=Counter)  # of every answer; 0: none
    same_tag: int = 0
    refused: int = 0  # 503 anywhere
    loads: list[str] = field(default_factory=list)


def ms(value: float) -> str:
    return f"{value:,.0f} ms" if abs(value) >= 100 else f"{value:.1f} ms"


def section(args: argparse.Namespace, report: Report, *, path: str, wait_sec: int) -> str:
    """The Markdown section: ``path`` is the document the guests wait on, ``wait_sec`` the
    timeout_sec they ask for."""
    idle, waiting = report.idle, report.waiting
    assert idle is not None and waiting is not None
    names = list(waiting.rss_kib)
    rows = [
        f"| {name} | {idle.rss_kib[name] / 1024:,.1f} MiB | {waiting.rss_kib[name] / 1024:,.1f} "
        f"MiB | {report.per_worker.get(name, 0):,} | {idle.cpu[name] * 100:.1f} % | "
        f"{waiting.cpu[name] * 100:.1f} % |"
        for name in names
    ]
    workers = [n for n in names if n != "parent"]
    added = sum(waiting.rss_kib[n] - idle.rss_kib[n] for n in workers) * 1024
    per_connection = added / max(1, report.guests)
    from_start = sorted(s for s, _ in report.single)
    from_answer = sorted(a for _, a in report.single)
    fan = report.fan_out
    feed = "LISTEN/NOTIFY" if report.database == "postgresql" else "a poll every 20 ms"
    statuses = ", ".join(f"{s or 'no answer'}: {n:,}" for s, n in sorted(report.statuses.items()))
    return "\n".join(
        [
            f"## Long-polls: {report.guests:,} guests waiting for a change ({report.database})",
            "",
            f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; code {code_version()}",
            f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}, "
            f"Python {platform.python_version()}; shared with other work: load average (1, 5, "
            f"15 min) {'; '.join(report.loads)} at the start of the idle, waiting and "
            "fan-out phases",
            "- Command: `.venv/bin/python bench/longpoll.py "
            f"--guests {args.guests} --database {args.database} --write docs/benchmarks.md` "
            "(`make bench-longpoll`)",
            f"- Server: `cloudseed serve --workers {args.workers} --no-compute` on "
            f"{report.database} (change feed: {feed}), behind a simulated Neutron metadata "
            "proxy (signed `X-Instance-ID` headers), log level warning; `[metadata]` defaults "
            "(`max_waiters` 20,000 and `max_waiters_per_instance` 16 per worker, enough); "
            f"file descriptors: soft and hard limit {report.fd_limit[0]:,} and "
            f"{report.fd_limit[1]:,} (server and client)",
            f"- Guests: {report.seeded:,} servers created through the compute API (all ACTIVE "
            f"after {report.seeding_seconds:.1f} s), {report.guests:,} of them waiting; each "
            "cached in both workers before the baseline",
            f"- Client: one process (uvloop, an `asyncio.Protocol` per connection), one "
            f"kept-alive connection per guest: `GET {path}` for its ETag, then "
            f"`?wait_for_change=true&last_etag=TAG&timeout_sec={wait_sec}` on the same "
            f"connection; all {report.guests:,} waiting {report.connect_seconds:.1f} s after "
            "the first connection",
            "",
            "| Process | RSS, nothing waiting | RSS, all waiting | Waiting connections | "
            f"CPU idle, nothing waiting | CPU idle, all waiting ({args.idle_seconds} s) |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"- Memory per waiting connection: {per_connection:,.0f} bytes of the workers' RSS "
            "(the connection's Python objects, the request, the waiter and its disconnect "
            "watch; the kernel's socket buffers are not in RSS)",
            f"- One guest's change (`PUT /v2.1/servers/ID/metadata/role`, {len(report.single)} "
            "guests in turn, the other waiters left waiting): its answer "
            f"{ms(statistics_median(from_answer))} median, {ms(max(from_answer))} at most after "
            f"the PUT's answer ({ms(statistics_median(from_start))} / {ms(max(from_start))} after "
            "the PUT was sent; negative: the waiter in the worker that served the PUT was woken "
            f"by its commit before the API's answer left). Other guests woken: "
            f"{report.woken_others}",
            "- Everyone's change (`PUT /v2.1/os-project-keys/bench`, 2.106: a new key for "
            f"each of the {report.seeded:,} servers in one transaction, {ms(report.put_ms)} "
            f"until its answer): the first guest answered {ms(fan[0])}, the median "
            f"{ms(statistics_median(fan))}, p90 {ms(percentile(fan, 90))}, p99 "
            f"{ms(percentile(fan, 99))}, the last {ms(fan[-1])} after the PUT's answer "
            "(negative: before it, woken in-process as above)",
            f"- Answers: {statuses} (first GETs and long-polls together); long-polls answered "
            f"with the tag they had: {report.same_tag}; refused (503): {report.refused}",
        ]
    )


def statistics_median(values: list[float]) -> float:
    return percentile(values, 50)
