"""Metadata service boot storm: N guests running cloud-init's crawl at once, against cloudseed
and, side by side, against nginx serving the same bytes as static files.

One run, on one machine, load generator included:

1. set-up: a fresh SQLite state directory (``cloudseed db sync``), a flavor, an image, a /16
   network and a key pair; ``cloudseed serve --workers 2`` behind a simulated Neutron metadata
   proxy (``[neutron] service_metadata_proxy``: every request names its instance in signed
   ``X-Instance-ID`` headers); ``--instances`` servers created through the compute API
   (multi-create, each with a key, ~300 bytes of cloud-config user data and server metadata),
   timed until all are ACTIVE;
2. the crawl: cloud-init's OpenStack datasource request sequence (reference ``cloud-init.md``
   1.2: ``/openstack`` twice, the five documents of the version it picks, then the EC2 tree
   ``/latest/meta-data/`` crawled recursively by cloud-init's own rules), found by crawling
   one guest with httpx;
3. the storm, with ``wrk`` and ``bench/metadata_storm_wrk.lua``: first one pass over every
   (instance, path) with empty caches (the real boot storm: each worker loads each instance
   from the database on its first request), then a timed pass with everything cached;
   memory (the workers' VmRSS) before and after every instance is cached;
4. nginx (``worker_processes 2``, unprivileged, foreground) serving every guest's documents,
   fetched once from cloudseed, as static files, under the same wrk settings: the ceiling;
5. change visibility: user data changed through the API (2.105), then polled on connections
   known (from /proc) to belong to each worker, until every worker serves the new value;
6. a py-spy profile of one worker during another warm pass, summarised by own time.

Usage (from the repository root, with the project's venv; needs Debian's ``wrk`` and
``nginx-light`` or ``nginx``, and ``py-spy`` from PyPI in the venv)::

    .venv/bin/python bench/metadata_storm.py [--instances 10000] [--duration 20]
        [--connections 256] [--threads 2] [--workers 2] [--write docs/benchmarks.md]

``--write`` replaces the section between ``<!-- bench:metadata-storm:start -->`` and
``<!-- bench:metadata-storm:end -->`` of the Markdown file, adding it when absent.

This file is the command (its options and the run's order); the pieces, which the other
benchmarks in bench/ use too, are in bench/storm_*.py: storm_server (``cloudseed serve``),
storm_seeding, storm_crawl, storm_wrk, storm_nginx, storm_workers (memory, CPU and connections
per worker), storm_changes, storm_profile, storm_results (what the run measured), storm_targets
(the targets table) and storm_report (the rest of this section's Markdown).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from report import write_section
from storm_building import BuildLoad, remove_earlier_builds
from storm_changes import measure_change_visibility
from storm_crawl import cloud_init_paths, crawl_bytes
from storm_host import load_average, require_tool, step, venv_tool
from storm_nginx import fetch_documents, running_nginx
from storm_profile import profile_worker
from storm_report import (
    INTRO,
    building_line,
    change_lines,
    idle_line,
    memory_lines,
    profile_lines,
    section_text,
)
from storm_results import Report
from storm_seeding import seeded_state
from storm_server import running_server, standalone_agent
from storm_workers import connections_by_worker, fill_every_worker, idle_cpu_share, settled_rss
from storm_wrk import run_wrk, run_wrk_one_cycle, write_storm_files, wrk_command

MARKERS = ("<!-- bench:metadata-storm:start -->", "<!-- bench:metadata-storm:end -->")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=10_000, help="simulated guests")
    parser.add_argument("--duration", type=int, default=20, help="seconds per warm pass")
    parser.add_argument("--connections", type=int, default=256, help="wrk -c")
    parser.add_argument("--threads", type=int, default=2, help="wrk -t")
    parser.add_argument("--workers", type=int, default=2, help="cloudseed (and nginx) workers")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="warm passes against each of cloudseed and nginx, alternating; "
        "the best of each is compared",
    )
    parser.add_argument("--batch", type=int, default=200, help="servers per multi-create")
    parser.add_argument(
        "--create-concurrency", type=int, default=2, help="multi-create requests in flight"
    )
    parser.add_argument(
        "--paced-rate",
        type=int,
        default=10_000,
        help="requests/s offered in an extra, paced warm pass (0: skip); "
        "the p99 target is judged there (the requests/s target's load)",
    )
    parser.add_argument(
        "--building",
        type=int,
        default=2000,
        metavar="N",
        help="servers created and built during a second paced pass (the boot storm with "
        "the compute API and agent busy beside it; 0: skip; they stay in the state)",
    )
    parser.add_argument("--change-trials", type=int, default=20)
    parser.add_argument("--profile-seconds", type=int, default=10, help="0: no profile")
    parser.add_argument(
        "--state",
        metavar="DIR",
        type=Path,
        help="keep the seeded databases here, and reuse them when they hold "
        "--instances servers (seeding 10,000 takes minutes)",
    )
    parser.add_argument(
        "--no-nginx",
        action="store_true",
        help="skip the nginx comparison (quicker runs while tuning)",
    )
    parser.add_argument(
        "--no-compute",
        action="store_true",
        help="the measured server without the embedded compute agent (serve --no-compute, "
        "the agent elsewhere); the seeding always runs one",
    )
    parser.add_argument(
        "--apart",
        type=int,
        metavar="NICE",
        help="the layout of docs/deployment.md for storms during builds: the measured server "
        "runs the metadata service alone (`serve --enabled-apis metadata`); --building's "
        "creates go to a `serve --enabled-apis osapi_compute --no-compute` and its builds to "
        "a `cloudseed compute`, both at this CPU niceness (0-19)",
    )
    parser.add_argument(
        "--no-load-ahead",
        action="store_true",
        help="the measured server loads no guest ahead (load_ahead_seconds = 0): the guests "
        "--building builds load at their first request, and its workers do no loading while "
        "the builds run",
    )
    parser.add_argument(
        "--new-connections",
        action="store_true",
        help="every request on a connection of its own (Connection: close), as cloud-init's "
        "readurl asks: each guest's request is then also a TCP connection to accept and close",
    )
    parser.add_argument(
        "--write",
        metavar="PATH",
        type=Path,
        help="replace the metadata storm section of this Markdown file",
    )
    args = parser.parse_args(argv)
    if args.instances < args.threads or args.connections < args.threads:
        parser.error("--instances and --connections must be at least --threads")
    if (
        min(
            args.duration,
            args.workers,
            args.rounds,
            args.batch,
            args.create_concurrency,
            args.change_trials,
        )
        < 1
    ):
        parser.error("counts and durations must be positive")
    return args


def run(args: argparse.Namespace, tmp: Path, report: Report) -> None:
    data_dir, report.seeding = seeded_state(args, tmp)
    instances = report.seeding.instances[: args.instances]
    priming = report.seeding.instances[args.instances :]
    apart = args.apart is not None
    if args.building and not args.no_compute:
        remove_earlier_builds(data_dir, args.workers, set(report.seeding.instances))
    # A new server for the storm: its workers have done nothing else (so their memory is the
    # metadata service's alone), as after a restart long after the seeding's boots: with
    # load_ahead_seconds = 1 it loads none of them at start (the cold pass is every guest's
    # first contact), and loads ahead the guests it builds itself (the --building pass's).
    with contextlib.ExitStack() as processes:
        server = processes.enter_context(
            running_server(
                data_dir,
                args.workers,
                compute=not (args.no_compute or apart),
                load_ahead_seconds=0 if args.no_load_ahead else 1,
                apis="metadata" if apart else "osapi_compute,metadata",
            )
        )
        api = server.api
        if apart:
            # Up from the start: creates made before the agent's first heartbeat find no host.
            # The agent takes the host serve's embedded one had, whose next run deletes them.
            processes.enter_context(standalone_agent(data_dir, host=None, nice=args.apart))
            api = processes.enter_context(
                running_server(data_dir, 1, compute=False, apis="osapi_compute", nice=args.apart)
            ).api
        metadata = f"http://127.0.0.1:{server.metadata_port}"
        done = step("crawling one guest as cloud-init does")
        report.paths = cloud_init_paths(metadata, instances[0])
        report.crawl_bytes = crawl_bytes(metadata, instances[0], report.paths)
        print("  " + " ".join(report.paths))
        files = write_storm_files(tmp / "storm", instances, report.paths)
        done()

        done = step(f"priming: {len(priming)} other guests' crawls, for the memory baseline")
        run_wrk_one_cycle(
            "priming",
            wrk_command(
                args,
                metadata,
                "cloudseed",
                write_storm_files(tmp / "priming", priming, report.paths),
                900,
                one_cycle=True,
            ),
            args.threads,
        )
        done()
        report.rss_before = settled_rss(server)
        report.loads.append(load_average())
        done = step("cold pass: every guest's crawl once, nothing cached")
        report.cold = run_wrk_one_cycle(
            "cloudseed, cold caches (boot storm)",
            wrk_command(args, metadata, "cloudseed", files, 900, one_cycle=True),
            args.threads,
        )
        done()
        done = step("every guest into every worker (the ones the cold pass missed)")
        fill_started = time.perf_counter()
        fill_every_worker(
            server,
            instances,
            [p for p in report.paths if p.endswith(("meta_data.json", "network_data.json"))],
        )
        report.fill_seconds = time.perf_counter() - fill_started
        done()
        report.rss_after = settled_rss(server)
        print("  " + "; ".join(memory_lines(report)))

        with contextlib.ExitStack() as stack:
            nginx = None
            if not args.no_nginx:
                done = step("fetching every guest's documents for nginx")
                report.static = fetch_documents(
                    server.metadata_port, instances, report.paths, tmp / "www" / "docs"
                )
                done()
                if set(report.static.statuses) != {200}:
                    report.failures.append(f"documents: statuses {dict(report.static.statuses)}")
                nginx = stack.enter_context(
                    running_nginx(report.static.root, tmp / "nginx", args.workers)
                )
            for round_ in range(args.rounds):
                label = f" (round {round_ + 1})" if args.rounds > 1 else ""
                report.loads.append(load_average())
                done = step(f"warm pass against cloudseed{label}, {args.duration} s")
                report.warm.append(
                    run_wrk(
                        f"cloudseed, warm{label}",
                        wrk_command(args, metadata, "cloudseed", files, args.duration, False),
                        probe=lambda: report.split.append(connections_by_worker(server)),
                    )
                )
                done()
                if nginx is None:
                    continue
                report.loads.append(load_average())
                done = step(f"same pass against nginx{label}, {args.duration} s")
                report.nginx.append(
                    run_wrk(
                        f"nginx, static files{label}",
                        wrk_command(args, nginx, "nginx", files, args.duration, False),
                    )
                )
                done()

        if args.paced_rate:
            # wrk's delay is whole milliseconds and each answer's own latency (about 1.5 ms
            # here) adds to it: without that, 10,000 asked for were about 9,300 offered.
            delay_ms = max(1, round(args.connections / args.paced_rate * 1000 - 1.5))
            report.loads.append(load_average())
            done = step(
                f"paced pass against cloudseed: each connection waits {delay_ms} ms "
                f"between requests (about {args.paced_rate:,} req/s offered)"
            )
            report.paced = run_wrk(
                f"cloudseed, warm, paced ({delay_ms} ms between a connection's requests)",
                wrk_command(args, metadata, "cloudseed", files, args.duration, False),
                delay_ms=delay_ms,
            )
            done()
            if args.building and not args.no_compute:
                report.loads.append(load_average())
                done = step(
                    f"the same paced pass while {args.building:,} more servers are created "
                    "and built"
                )
                with BuildLoad(api, instances[0], args.building) as load:
                    report.paced_building = run_wrk(
                        f"cloudseed, warm, paced, while {args.building:,} servers are "
                        "created and built",
                        wrk_command(args, metadata, "cloudseed", files, args.duration, False),
                        delay_ms=delay_ms,
                    )
                report.building = load.report
                print(f"  {building_line(report)}")
                done()
                done = step(
                    f"boot storm of the {args.building:,} guests just built: each one's "
                    "crawl once (loaded ahead as their builds finished)"
                )
                report.just_built = run_wrk_one_cycle(
                    "cloudseed, the guests just built (boot storm, loaded ahead)",
                    wrk_command(
                        args,
                        metadata,
                        "cloudseed",
                        write_storm_files(tmp / "just-built", load.report.created, report.paths),
                        900,
                        one_cycle=True,
                    ),
                    args.threads,
                )
                done()

        done = step("idle: the workers' CPU use with no requests, 10 s")
        time.sleep(2)  # the last pass's connections close
        report.idle_cpu = idle_cpu_share(server, 10)
        print(f"  {idle_line(report)}")
        done()

        done = step(f"change visibility: {args.change_trials} user data changes")
        report.changes = measure_change_visibility(
            server, instances[len(instances) // 2], args.change_trials, api_base=api
        )
        print("  " + "; ".join(change_lines(report)))
        done()

        if args.profile_seconds:
            done = step(f"profiling one worker for {args.profile_seconds} s in a warm pass")
            report.profile = profile_worker(
                args,
                server.worker_pids()[0],
                wrk_command(args, metadata, "cloudseed", files, args.profile_seconds + 4, False),
                tmp / "profile.txt",
            )
            print("\n".join("  " + line for line in profile_lines(report)))
            done()

    passes = [report.cold, *report.warm, *report.nginx, report.paced, report.paced_building]
    for r in [*passes, report.just_built]:
        if r is not None and r.errors:
            report.failures.append(
                f"{r.what}: {r.non_200} non-200 answers "
                f"{r.statuses}, socket errors {r.socket_errors}"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tool("wrk", "wrk")
    require_tool("nginx", "nginx-light")
    if args.profile_seconds:
        venv_tool("py-spy", "pip install py-spy into the venv")
    report = Report(args)
    if args.new_connections:
        os.environ["STORM_CONNECTION_CLOSE"] = "1"  # read by every wrk's Lua script
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cloudseed-storm-") as tmp_name:
        run(args, Path(tmp_name), report)
    print(f"\ntotal {time.perf_counter() - started:.0f} s\n")
    section = section_text(report)
    print(section)
    if args.write is not None:
        write_section(args.write, *MARKERS, section, INTRO)
        print(f"wrote the metadata storm section of {args.write}")
    if report.failures:
        print("FAILED:\n" + "\n".join(f"- {f}" for f in report.failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
