"""The metadata storm's section of docs/benchmarks.md, as Markdown, from the ``Report`` of
storm_results: the run's setup, the targets table (storm_targets) and the verdict under it, the
passes table, memory, change visibility, builds, idle CPU and the profile. INTRO is the text a
docs/benchmarks.md written afresh starts with; bench/metrics_overhead.py writes it too."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import statistics
import sys
from collections import Counter

from report import code_version, cpu_model
from storm_nginx import nginx_version
from storm_results import Report, kib_per_instance, visibility_ms
from storm_seeding import PRIMING_INSTANCES, SERVER_METADATA, USER_DATA, Seeding
from storm_targets import targets_table
from storm_workers import SETTLE_SECONDS
from storm_wrk import best

INTRO = """# Benchmarks

Measured numbers for cloudseed; each section says the command that reproduces it (run from the
repository root after `make test-venv`). Numbers from different machines are not comparable.
"""
NO_COMPUTE = {True: " --no-compute", False: ""}  # the measured server's flag


def passes_table(report: Report) -> str:
    lines = [
        "| Pass | Requests | Time | Requests/s | p50 | p99 | p99.9 | max | "
        "Statuses | Socket errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    assert report.cold is not None
    passes = [
        report.cold,
        *report.warm,
        *report.nginx,
        report.paced,
        report.paced_building,
        report.just_built,
    ]
    for r in [r for r in passes if r is not None]:
        ms = {k: v / 1000 for k, v in r.latency_us.items()}
        statuses = ", ".join(f"{s}: {n:,}" for s, n in sorted(r.statuses.items()))
        lines.append(
            f"| {r.what} | {r.requests:,} | {r.seconds:.1f} s | {r.rps:,.0f} | "
            f"{ms['p50']:.2f} ms | {ms['p99']:.2f} ms | {ms['p999']:.2f} ms | "
            f"{ms['max']:.1f} ms | {statuses} | {sum(r.socket_errors.values())} |"
        )
    return "\n".join(lines)


def memory_lines(report: Report) -> list[str]:
    before, after = report.rss_before, report.rss_after
    per_worker = ", ".join(
        f"{before[p] / 1024:.1f} → {after[p] / 1024:.1f} MiB" for p in sorted(after)
    )
    grown = sum(after.values()) - sum(before.values())
    return [
        "- Workers' RSS (VmRSS) before the cold pass (after the priming crawl of "
        f"{PRIMING_INSTANCES} other guests) and after it, every instance cached in every "
        f"worker, each read {SETTLE_SECONDS:.0f} s after the last request (a worker trims its "
        f"heap once loading has been quiet for a second): {per_worker}. After the cold "
        "pass, each worker was also asked for every guest's meta_data.json and "
        "network_data.json on connections of its own "
        f"({report.fill_seconds:.1f} s), since wrk's connections are not spread evenly: "
        f"during the warm passes the workers held {split_text(report)} of wrk's "
        f"{report.args.connections} connections",
        f"- Growth: {grown / 1024:.1f} MiB for {report.args.instances:,} instances in "
        f"{len(after)} workers = {grown / report.args.instances * 1000 / 1024:.2f} MiB per "
        f"1,000 instances (all workers together); {kib_per_instance(report):.2f} KiB per "
        "instance in the worker that grew most",
    ]


def split_text(report: Report) -> str:
    if not report.split:
        return "(not measured yet)"
    return "; ".join(" / ".join(str(n) for n in counts.values()) for counts in report.split)


def building_line(report: Report) -> str:
    built, paced = report.building, report.paced_building
    if built is None or paced is None:
        return "- Not measured while servers are built (`--building 0` or `--no-compute`)"
    refused = (
        f"; {len(built.refusals)} multi-creates refused and posted again" if built.refusals else ""
    )
    nice = report.args.apart
    where = (
        "built by the agents in the same workers"
        if nice is None
        else f"built by a `cloudseed compute`, the API and the agent at niceness {nice} in "
        "processes of their own"
    )
    return (
        f"- While {built.servers:,} more servers were created through the compute API "
        f"(multi-creates of 100, one at a time, beside the pass) and {where}: "
        f"the paced pass served {paced.rps:,.0f} requests/s, p99 "
        f"{paced.latency_us['p99'] / 1000:.2f} ms; the creates took {built.create_seconds:.1f} s, "
        f"{built.building_at_end:,} servers were still building when the pass ended, all were "
        f"ACTIVE {built.all_active_seconds:.1f} s after the first create{refused} "
        "(docs/deployment.md says how to keep the API and the agent out of the metadata "
        "workers)"
    )


def measured_server(args: argparse.Namespace) -> str:
    if args.apart is None:
        return f"`cloudseed serve --workers {args.workers}{NO_COMPUTE[args.no_compute]}`"
    return (
        f"`cloudseed serve --workers {args.workers} --enabled-apis metadata` (the compute "
        "API in a `serve --enabled-apis osapi_compute --no-compute` of one worker and the "
        f"agent in a `cloudseed compute`, both at niceness {args.apart}, docs/deployment.md)"
    )


def building_lines(report: Report) -> list[str]:
    return [] if report.building is None else [building_line(report)]


def idle_line(report: Report) -> str:
    shares = ", ".join(f"{share:.1%}" for share in report.idle_cpu.values())
    return (
        f"- Idle (no requests for 10 s, every instance cached): the workers use {shares} of "
        "a core each, following the change feed"
    )


def change_lines(report: Report) -> list[str]:
    visible = visibility_ms(report)
    puts = [t.put_ms for t in report.changes]
    pids = sorted(report.changes[0].visible_ms)
    per_worker = "; ".join(
        f"worker {i + 1}: p50 {statistics.median(t.visible_ms[p] for t in report.changes):.1f}"
        f" ms, max {max(t.visible_ms[p] for t in report.changes):.1f} ms"
        for i, p in enumerate(pids)
    )
    return [
        f"- {len(report.changes)} user data changes (PUT at 2.105), each polled on 4 "
        f"connections per worker (each connection's worker read from /proc) from the PUT's "
        f"answer on: slowest worker p50 {statistics.median(visible):.1f} ms, max "
        f"{max(visible):.1f} ms; {per_worker}; the PUT itself p50 "
        f"{statistics.median(puts):.1f} ms"
    ]


def profile_lines(report: Report) -> list[str]:
    profile = report.profile
    if profile is None:
        return ["Not profiled (`--profile-seconds 0`)."]
    share = ", ".join(f"{name} {n / profile.samples:.0%}" for name, n in profile.threads)
    lines = [
        f"py-spy, {report.args.profile_seconds} s of one worker at 250 samples/s during a "
        f"warm pass: {profile.samples:,} samples of running Python (time waiting in the "
        f"event loop's poll or on a lock is not sampled); by thread: {share}.",
        "",
        "| Own time | Frame (innermost) |",
        "|---:|---|",
    ]
    lines += [f"| {n / profile.samples:.1%} | `{frame}` |" for frame, n in profile.own]
    lines += [
        "",
        "| Inclusive | Frame (anywhere on the stack, entry and event loop frames left out) |",
        "|---:|---|",
    ]
    lines += [f"| {n / profile.samples:.1%} | `{frame}` |" for frame, n in profile.inclusive]
    return lines


def command_line() -> str:
    script = os.path.relpath(sys.argv[0])
    exe = os.path.relpath(sys.executable)
    return shlex.join(
        [
            exe if not exe.startswith("..") else sys.executable,
            script if not script.startswith("..") else sys.argv[0],
            *sys.argv[1:],
        ]
    )


def section_text(report: Report) -> str:
    args, seeding = report.args, report.seeding
    assert seeding is not None
    targets, missed = targets_table(report)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    verdict = (
        "All targets met."
        if not missed
        else "Not met: " + "; ".join(missed) + ". See the profile below."
    )
    verdict += latency_note(report)
    return "\n".join(
        [
            "## Metadata service boot storm",
            "",
            f"- Date: {now}",
            f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}; shared with other work: "
            f"load average (1, 5, 15 min) {', '.join(report.loads)} at the start of each pass",
            f"- Command: `{command_line()}`",
            f"- Code: {code_version()}",
            f"- Server: {measured_server(args)} on SQLite, behind a simulated "
            "Neutron metadata proxy (`[neutron] service_metadata_proxy = true`: every request "
            "carries `X-Instance-ID`, `X-Tenant-ID` and its HMAC signature), log level warning; "
            "started afresh after the seeding, so its workers hold nothing else",
            f"- Guests: {args.instances:,} servers (and {PRIMING_INSTANCES} more, crawled once "
            "before the memory baseline) created through the compute API (multi-create, "
            f"{args.batch} a request, {args.create_concurrency} requests at a time), each with a "
            f"key pair, {len(USER_DATA)} bytes of cloud-config user data and "
            f"{len(SERVER_METADATA)} metadata items: created in {seeding.create_seconds:.1f} s, "
            f"all ACTIVE after {seeding.active_seconds:.1f} s "
            f"({len(seeding.instances) / seeding.active_seconds:,.0f} servers/s; "
            f"a multi-create took "
            f"{seeding.batch_seconds[0]:.1f} s first and {seeding.batch_seconds[-1]:.1f} s last)"
            + refusal_note(seeding),
            f"- The crawl: {len(report.paths)} requests per guest, {report.crawl_bytes:,}"
            " bytes of bodies: cloud-init's OpenStack datasource sequence (`/openstack` twice, "
            f"`{report.paths[2].rsplit('/', 1)[0]}/` meta_data.json, user_data, vendor_data.json, "
            "vendor_data2.json, network_data.json) and its EC2 crawl of `/latest/meta-data/` "
            "(every listing and leaf, in cloud-init's order)",
            f"- Load: `wrk -t{args.threads} -c{args.connections} --latency` on the same machine "
            "with `bench/metadata_storm_wrk.lua`: each wrk thread walks its half of the guests "
            f"{args.connections // args.threads} at a time, one crawl step for each, so each "
            "guest's requests come in order and spread over both workers. Cold pass: exactly one "
            f"request per (guest, path), caches empty; warm passes: {args.duration} s each"
            + (
                "; every request on a new connection (`Connection: close`, as cloud-init's "
                "readurl opens one per request), on both servers"
                if args.new_connections
                else ""
            ),
            nginx_note(args),
            "",
            targets,
            "",
            verdict,
            "",
            passes_table(report),
            "",
            *memory_lines(report),
            *change_lines(report),
            *building_lines(report),
            idle_line(report),
            "",
            "### Where a worker's time goes",
            "",
            *profile_lines(report),
            "",
        ]
    )


def latency_note(report: Report) -> str:
    """What the p99 at saturation means, and the latency at a set load."""
    connections = report.args.connections
    note = (
        f"\n\nAt saturation the load is closed-loop: {connections} connections, each "
        "sending its next request when the last is answered, so the mean latency is "
        f"{connections} / throughput (Little's law) and a p99 under 10 ms needs well over "
        f"{connections * 100:,} requests/s"
    )
    if report.nginx:
        nginx = best(report.nginx)
        note += (
            f" (nginx: {nginx.rps:,.0f} requests/s, p99 {nginx.latency_us['p99'] / 1000:.1f} ms)"
        )
    note += "."
    paced = report.paced
    if paced is not None:
        ms = {k: v / 1000 for k, v in paced.latency_us.items()}
        note += (
            f" At a set load instead, {paced.rps:,.0f} requests/s through the same "
            f"{connections} connections (the paced pass), cloudseed answers with p50 "
            f"{ms['p50']:.2f} ms, p99 {ms['p99']:.2f} ms, max {ms['max']:.1f} ms."
        )
    return note


def nginx_note(args: argparse.Namespace) -> str:
    if args.no_nginx:
        return "- nginx: not measured in this run (`--no-nginx`)"
    return (
        f"- nginx {nginx_version()}: `worker_processes {args.workers}`, unprivileged, "
        "`access_log off`, default file handling (open, sendfile, close per request), "
        "serving each guest's documents (fetched once from cloudseed) as static files "
        "`/<instance id>/<path with / as ~>`, same requests and headers, same wrk settings"
    )


def refusal_note(seeding: Seeding) -> str:
    if not seeding.refusals:
        return ""
    kinds = Counter(r.split(" ", 1)[0] for r in seeding.refusals)
    causes = "; ".join(seeding.causes) or "see the server log"
    return (
        f"; {len(seeding.refusals)} multi-creates were refused "
        f"({', '.join(f'{status}: {n}' for status, n in kinds.items())}; {causes}) and "
        "posted again"
    )
