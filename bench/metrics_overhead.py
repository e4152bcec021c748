"""What the Prometheus metrics cost the metadata service: requests/s and latency of one warm
guest's cloud-init requests, with ``[metrics] enabled`` on and off, in one run.

Set-up as bench/metadata_storm.py (a fresh SQLite state directory, ``cloudseed serve
--workers 2`` behind a simulated Neutron metadata proxy: signed ``X-Instance-ID`` headers),
with one server. Then rounds alternate between metrics off and on (each round its own serve
process, one untimed warm-up pass, then ``wrk`` for ``--duration`` seconds over the first 8
paths of cloud-init's crawl); the best round of each side is reported, and after the last "on"
round one scrape shows the requests were counted.

Usage (from the repository root, with the project's venv; needs Debian's ``wrk``)::

    .venv/bin/python bench/metrics_overhead.py [--rounds 2] [--duration 10]
        [--connections 8] [--threads 2] [--write docs/benchmarks.md]

``--write`` replaces the section between ``<!-- bench:metrics-overhead:start -->`` and
``<!-- bench:metrics-overhead:end -->``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx
from report import cpu_model, write_section
from storm_crawl import cloud_init_paths
from storm_host import load_average
from storm_report import INTRO
from storm_seeding import register, seed
from storm_server import running_server
from storm_workers import cpu_seconds
from storm_wrk import StormFiles, WrkResult, run_wrk, write_storm_files, wrk_command

MARKERS = ("<!-- bench:metrics-overhead:start -->", "<!-- bench:metrics-overhead:end -->")
PATHS = 8


def one_round(
    data_dir: Path, files: StormFiles, args: argparse.Namespace, *, enabled: bool
) -> tuple[WrkResult, float, float | None]:
    """``args``: the command line's (threads, connections, duration)."""
    """One serve process with metrics ``enabled`` or not: warm-up, then the timed wrk run;
    with metrics, the metadata requests counted by a scrape afterwards."""
    os.environ["CLOUDSEED_METRICS__ENABLED"] = "true" if enabled else "false"
    what = f"metrics {'on' if enabled else 'off'}"
    with running_server(data_dir, 2) as server:
        url = f"http://127.0.0.1:{server.metadata_port}"
        warm = wrk_command(args, url, "cloudseed", files, 3, one_cycle=False)
        run_wrk(f"{what} (warm-up)", warm)
        command = wrk_command(args, url, "cloudseed", files, args.duration, one_cycle=False)
        workers = server.worker_pids()
        cpu_before = sum(cpu_seconds(pid) for pid in workers)
        result = run_wrk(what, command)
        # The workers' own CPU time per request: what other processes on the machine do to
        # the throughput (a shared machine) hardly changes it.
        cpu_us = (sum(cpu_seconds(pid) for pid in workers) - cpu_before) / result.requests
        cpu_us *= 1e6
        print(f"  {what}: {cpu_us:.1f} µs of worker CPU per request", flush=True)
        counted = None
        if enabled:
            text = httpx.get(f"{url}/metrics", timeout=10).text
            counted = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("cloudseed_http_requests_total{")
                and 'listener="metadata"' in line
            )
    return result, cpu_us, counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cloudseed-metrics-bench-") as tmp:
        data_dir = Path(tmp) / "state"
        data_dir.mkdir()
        registries = register(data_dir)
        os.environ["CLOUDSEED_METRICS__ENABLED"] = "true"
        with running_server(data_dir, 2) as server:
            (instance,) = seed(server, registries, 1, 1, 1).instances
            metadata = f"http://127.0.0.1:{server.metadata_port}"
            paths = cloud_init_paths(metadata, instance)[:PATHS]
        # The wrk script shares the instances out over its threads: one copy per thread.
        files = write_storm_files(Path(tmp) / "wrk", [instance] * args.threads, paths)
        rounds: dict[bool, list[WrkResult]] = {False: [], True: []}
        cpu: dict[bool, list[float]] = {False: [], True: []}
        counted: list[float] = []
        load_before = load_average()
        for _ in range(args.rounds):
            for enabled in (False, True):
                result, cpu_us, seen = one_round(data_dir, files, args, enabled=enabled)
                cpu[enabled].append(cpu_us)
                if result.errors:
                    raise SystemExit(f"{result.what}: {result.errors} errors")
                rounds[enabled].append(result)
                if seen is not None:
                    counted.append(seen)
                time.sleep(1)
        load_after = load_average()
    off = max(rounds[False], key=lambda r: r.rps)
    on = max(rounds[True], key=lambda r: r.rps)
    cost = 1 - on.rps / off.rps
    lines = [
        "## Metrics overhead (metadata service)",
        "",
        f"`.venv/bin/python bench/metrics_overhead.py --rounds {args.rounds} --duration "
        f"{args.duration:g} --connections {args.connections} --threads {args.threads} "
        "--write docs/benchmarks.md`, on "
        f"{cpu_model()} ({os.cpu_count()} CPUs), load average before {load_before}, after "
        f"{load_after}.",
        "",
        f"One warm guest, the first {PATHS} paths of cloud-init's crawl, signed proxy headers, "
        f"`cloudseed serve --workers 2` on SQLite, wrk with {args.connections} connections and "
        f"{args.threads} threads on the same cores; rounds alternate off/on, each its own serve "
        "process; best round per side.",
        "",
        "| [metrics] enabled | req/s (best) | every round | p50 ms | p99 ms "
        "| worker CPU µs/request (least; every round) |",
        "|---|---|---|---|---|---|",
    ]
    for enabled, best in ((False, off), (True, on)):
        every = ", ".join(f"{r.rps:,.0f}" for r in rounds[enabled])
        lines.append(
            f"| {'true' if enabled else 'false'} | {best.rps:,.0f} | {every} | "
            f"{best.latency_us['p50'] / 1000:.2f} | {best.latency_us['p99'] / 1000:.2f} | "
            f"{min(cpu[enabled]):.1f}; {', '.join(f'{c:.1f}' for c in cpu[enabled])} |"
        )
    lines += [
        "",
        f"Cost of metrics: {cost:.1%} of requests/s (best against best); "
        f"{min(cpu[True]) - min(cpu[False]):.1f} µs of worker CPU per request "
        f"({min(cpu[True]) / min(cpu[False]) - 1:.1%}, least against least), the figure a "
        "busy shared machine disturbs least. A scrape after each "
        f'"on" round counted {", ".join(f"{c:,.0f}" for c in counted)} metadata requests '
        "(warm-up, timed run and the scrape itself, summed over both workers).",
    ]
    section = "\n".join(lines)
    print(section)
    if args.write:
        write_section(args.write, *MARKERS, section, intro=INTRO)


if __name__ == "__main__":
    main()
