"""The soak's section of docs/benchmarks.md: what ran, what the chaos did, every answer by kind
and status, the checks, and each process's memory, threads and descriptors."""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from report import code_version, cpu_model, write_section
from soak_resources import CONNECTION_KIB, MEMORY_ALLOWANCE_SHARE, series

if TYPE_CHECKING:
    from soak_plan import Result

START, END = "<!-- bench:soak:start -->", "<!-- bench:soak:end -->"


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def write(path: Path, text: str) -> None:
    write_section(path, START, END, text)


def section(result: Result, *, command: str) -> str:
    plan = result.plan
    load = result.load_ended - result.load_started
    verdict = "**passed**" if not result.faults else f"**failed: {len(result.faults)} faults**"
    lines = [
        "## Soak under faults (issue 30)",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(result.started))}; code "
        f"{code_version()}",
        f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}; shared with other work: "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end",
        f"- Command: `.venv/bin/python {command}` (`make soak`, `SOAK_MINUTES=N` for another "
        "length); the test suite runs the same code for 75 s with 80 guests "
        "(tests/functional/test_soak.py)",
        "- Deployment: a PostgreSQL cluster of the soak's own (initdb, `pg_ctl`), an API node "
        "and a metadata node (`cloudseed serve --no-compute --workers 2` each: serve has no "
        "flag for one listener, so each node's other listener is bound to a port nobody uses), "
        "two agents (`cloudseed compute --host soak-1`, `soak-2`, fake driver "
        f"{plan.delay_ms} ms per operation, lease {plan.lease_seconds} s), one config file",
        f"- Load for {load:.0f} s (after {result.seeding_seconds:.0f} s of seeding "
        f"{plan.guests} servers; {result.settle_seconds:.1f} s for the last operations to end "
        f"afterwards; {result.finished - result.started:.0f} s in all): users at "
        f"{plan.op_rate:g} requests/s ({plan.op_clients} clients; {plan.churn} servers "
        f"created and deleted alive at once), {plan.guests} guests through signed proxy "
        f"headers ({plan.waiter_share:.0%} holding long-polls of {plan.wait_range[0]}-"
        f"{plan.wait_range[1]} s, the others reading every {plan.read_period:g} s), the "
        f"fuzzer at {plan.fuzz_rate:g} hostile requests/s ({result.fuzz_sent} sent); each "
        "request on a connection of its own (bench/soak_ledger.py says why); the load "
        f"generator's event loop ran at most {result.loop_lag:.1f} s late",
        f"- Verdict: {verdict}",
        "",
    ]
    if result.faults:
        lines += ["Faults:", ""] + [f"- {f[:400]}" for f in result.faults[:30]] + [""]
    lines += _chaos(result)
    lines += _answers(result)
    lines += _checks(result)
    lines += _processes(result)
    lines += _logged(result)
    return "\n".join(lines)


def _series(result: Result) -> list[str]:
    """The RSS of the processes that lived the whole run, at every tenth of the load."""
    whole = [inc for inc in result.incarnations if inc.whole_run]
    if not whole:
        return []
    points = 11
    out = [
        "",
        "RSS (MiB) of the processes that lived the whole run, at every tenth of the load:",
        "",
        "| process | " + " | ".join(f"{10 * i}%" for i in range(points)) + " |",
        "|---|" + "---:|" * points,
    ]
    for inc in whole:
        values = series(
            result.samples, inc.role, inc.pid, result.load_started, result.load_ended, points
        )
        out.append(f"| {inc.role} | " + " | ".join(_mib(v) for v in values) + " |")
    return out


def _logged(result: Result) -> list[str]:
    if not result.logged:
        return []
    out = ["", "Lines logged at ERROR (by message; the exception that ended its traceback):", ""]
    out += ["| log | message | lines |", "|---|---|---:|"]
    for name, message, count in result.logged:
        out.append(f"| {name} | {message.replace('|', '/')} | {count} |")
    return out


def _chaos(result: Result) -> list[str]:
    if result.chaos is None:
        return []
    out = ["| at | chaos | until whole again |", "|---:|---|---:|"]
    for e in result.chaos.events:
        recovery = f"{e.recovery:.1f} s" if e.recovery is not None else "—"
        out.append(f"| {e.at:.0f} s | {e.what}: {e.detail.splitlines()[0]} | {recovery} |")
    return [*out, ""]


def _answers(result: Result) -> list[str]:
    ledger = result.ledger
    by_channel: dict[str, Counter[str]] = {}
    for (channel, _kind, outcome), n in ledger.counts.items():
        by_channel.setdefault(channel, Counter())[outcome] += n
    out = ["| client | answers | by status |", "|---|---:|---|"]
    for channel, outcomes in sorted(by_channel.items()):
        detail = ", ".join(f"{k}: {v:,}" for k, v in sorted(outcomes.items()))
        out.append(f"| {channel} | {sum(outcomes.values()):,} | {detail} |")
    out.append("")
    j = result.judgement
    if j is not None:
        outage = ledger.outage
        window = f"{outage[1] - outage[0]:.1f} s" if outage else "none"
        last = f"{j.last_503_after_outage:+.1f} s" if j.last_503_after_outage is not None else "—"
        other = sum(1 for a in j.faults if a.outcome.isdigit())
        out += [
            f"- 5xx: {len(j.allowed_503)} answers 503 in the database's outage ({window}; the "
            f"last {last} after PostgreSQL answered again), {other} other 5xx",
            f"- No answer: {len(j.allowed_resets)} requests cut by a SIGKILL of the worker "
            f"holding them (within {result.plan.grace:g} s of it), "
            f"{sum(1 for a in j.faults if a.transport)} otherwise",
        ]
    users, guests = result.users, result.guests
    if users is not None:
        accepted = ", ".join(f"{k} {v}" for k, v in sorted(users.accepted.items()))
        unsure = ", ".join(f"{k} {v}" for k, v in sorted(users.uncertain.items())) or "none"
        out.append(f"- Users' changes accepted: {accepted}; without an answer: {unsure}")
    if guests is not None:
        polls = guests.long_polls
        out.append(
            f"- Long-polls: {polls['woken']:,} woken by a change, {polls['timed out']:,} timed "
            f"out with the tag they had; {guests.waiters()} guests waiting at a time"
        )
    return [*out, ""]


def _checks(result: Result) -> list[str]:
    n = result.findings.numbers
    out = ["Checks after the load:", ""]
    for key, value in n.items():
        out.append(f"- {key}: {value}")
    return [*out, ""]


def _processes(result: Result) -> list[str]:
    plan = result.plan
    out = [
        f"Processes (warm-up: the first {result.warmup_seconds:.0f} s of the load, "
        f"{plan.warmup_share:.0%} of it and at least until each kind of fault had happened "
        "once and settled, bench/soak_chaos.py; RSS in MiB; the slope from "
        "the samples after warm-up; growth allowed to the processes that lived the whole run: "
        f"{plan.memory_allowance_mib:g} MiB or {MEMORY_ALLOWANCE_SHARE:.0%}, whichever is "
        f"more, plus {CONNECTION_KIB} KiB per socket held beyond those at warm-up):",
        "",
        "| process | pid | lived | RSS at start | after warm-up | at the end | growth "
        "(allowed) | slope (KiB/min) | sockets (warm-up / end) | threads (warm-up / after) "
        "| most fds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for inc in result.incarnations:
        lived = inc.last.at - inc.first.at
        warm_rss = _mib(inc.warm.usage.rss_kib) if inc.warm else "—"
        growth = "—"
        if inc.growth_kib is not None and inc.whole_run:
            allowed = inc.allowed_kib(plan.memory_allowance_mib) / 1024
            growth = f"{inc.growth_kib / 1024:+.1f} ({allowed:.1f})"
        slope = f"{inc.slope_kib_per_minute:+.0f}" if inc.slope_kib_per_minute is not None else "—"
        sockets = f"{inc.warm.usage.sockets} / {inc.last.usage.sockets}" if inc.warm else "—"
        out.append(
            f"| {inc.role} | {inc.pid} | {lived:.0f} s | {_mib(inc.first.usage.rss_kib)} | "
            f"{warm_rss} | {_mib(inc.last.usage.rss_kib)} | {growth} | {slope} | {sockets} | "
            f"{inc.warm_threads} / {inc.later_threads} | {inc.most_fds} |"
        )
    out += _series(result)
    out += [
        "",
        "Descriptors in the quiet moments (before the load / after it, every client gone):",
        "",
    ]
    out += [
        "| process | files | database | listening | client | other sockets |",
        "|---|---|---|---|---|---|",
    ]
    for role in sorted(result.quiet_after):
        pid, b = result.quiet_after[role]
        before_pid, a = result.quiet_before.get(role, (0, Counter()))
        if before_pid != pid:
            role = f"{role} (a new process)"
        cells = " | ".join(
            f"{a[k]} / {b[k]}" for k in ("file", "database", "listening", "client", "other socket")
        )
        out.append(f"| {role} | {cells} |")
    return out
