"""``cloudseed nova-metadata`` beside Nova 34's own metadata API on the same Nova deployment
(issue 31, ``make bench-nova-dropin``).

One run stands up, on 127.0.0.1:

- real Nova 34 (tests/support/nova_peer.py: ``nova==34.0.0`` from PyPI in ``.cache/nova-venv``,
  ``nova-manage`` schemas and cells, Neutron-proxy metadata mode) on PostgreSQL when it answers,
  else on SQLite, with Nova's default ``[api] metadata_cache_expiration = 15``; seeded with the
  proof's shapes and ``--guests`` more instances of one shape through Nova's own objects
  (tests/support/nova_seed.py ``--bulk``: one ssh key, cloud-config user data, two metadata
  items, one NIC with a fixed IPv4 address, a root disk);
- Nova's metadata API (``nova.wsgi.metadata:application``) under uwsgi (its faster server
  here) and under gunicorn, and ``cloudseed nova-metadata --config-file <the same nova.conf>``,
  each with ``--workers`` worker processes (bench/nova_dropin_servers.py).

Measured, with the signed headers of Neutron's metadata proxy (bench/metadata_storm_wrk.lua):

1. idle database cost per node: transactions per Nova database (PostgreSQL's counters) and the
   drop-in's statements per worker, ``--idle-seconds`` without requests, Nova's servers alone,
   then with the drop-in (bench/nova_dropin_queries.py), and the database's time per poll;
2. the boot storms (bench/nova_dropin_storms.py), every guest requesting cloud-init's 8 usual
   paths once (bench/storm_crawl.py), ``--storm-connections`` connections, each server
   started afresh: **cold** (nothing cached, nothing loaded at start), and **just gone
   ACTIVE** (the instances put back to building before the server starts, Nova's last write
   as each goes ACTIVE after it answers, ``--boot-seconds`` for the guests to boot, then the
   storm: the drop-in hears of them through its watch, Nova's API needs not); a server too
   slow to reach every guest in ``--storm-seconds`` is stopped there; the drop-in's cold
   storm once more at ``--dropin-storm-connections``;
3. one warm guest rotating through the same paths at 8 and 64 connections, ``--duration`` s
   per round, the best of ``--rounds`` alternating rounds;

both beside nginx serving the drop-in's documents as static files (bench/storm_nginx.py), the
ceiling of any server on these cores with wrk on them too;
4. when the drop-in misses a target: a cProfile of a one-worker drop-in during a warm pass
   (bench/nova_dropin_profile.py).

Usage (from the repository root; needs Debian's wrk and nginx-light, matplotlib from the
``bench`` extra; installs Nova and then uwsgi into .cache/nova-venv on first use)::

    .venv/bin/python bench/nova_dropin.py [--guests 2000] [--backend auto] \
        [--write docs/benchmarks.md]

``--write`` replaces the section between ``<!-- bench:nova-dropin:start -->`` and
``<!-- bench:nova-dropin:end -->`` and draws ``docs/img/nova-dropin.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nova_dropin_idle
import nova_dropin_profile
import storm_identity
from nova_dropin_queries import measure_idle
from nova_dropin_report import (
    P99_GOAL_MS,
    STORM_GOAL,
    STORM_PREFIX,
    WARM_GOAL,
    chart,
    idle_table,
    storm_scenario,
    targets_table,
    verdicts,
    warm_scenario,
)
from nova_dropin_servers import Targets, bulk_seed, ensure_uwsgi, targets
from nova_dropin_storms import Run, cold, just_gone_active, storm_pass
from report import cpu_model, write_section
from side_by_side_report import NGINX, results_table
from side_by_side_rounds import measurement
from storm_crawl import CLOUD_INIT_PATHS
from storm_host import load_average, require_tool, step
from storm_nginx import fetch_documents, running_nginx
from storm_wrk import (
    WrkResult,
    best,
    run_wrk,
    write_storm_files,
    wrk_command,
)

from tests.support import databases, nova_peer

START, END = "<!-- bench:nova-dropin:start -->", "<!-- bench:nova-dropin:end -->"
PATHS = CLOUD_INIT_PATHS
WARM_CONNECTIONS = (8, 64)


def choose_backend(wanted: str, scratch: Path) -> str:
    """PostgreSQL when it answers (or when asked), else SQLite."""
    if wanted != "auto":
        return wanted
    try:
        with databases.scratch_database("postgresql", str(scratch)):
            return "postgresql"
    except databases.Unavailable as exc:
        print(f"PostgreSQL does not answer ({exc}): SQLite", flush=True)
        return "sqlite"


@contextmanager
def deployment(run: Run, tmp: Path) -> Iterator[tuple[nova_peer.Nova, list[str]]]:
    done = step(f"Nova 34 on {run.backend}: install (once), schemas, cells, the proof's shapes")
    with nova_peer.running_nova(tmp / "nova", run.backend, cache_expiration=15) as nova:
        done()
        ensure_uwsgi(nova.venv)
        done = step(f"seeding {run.args.guests:,} instances through Nova's objects")
        guests = bulk_seed(nova, run.args.guests)
        seconds = done()
        run.notes.append(
            f"Seeding {len(guests):,} instances through Nova's objects in one process took "
            f"{seconds:.0f} s."
        )
        yield nova, guests


@contextmanager
def ceiling(run: Run, chosen: Targets, tmp: Path, guests: list[str]) -> Iterator[str]:
    """nginx serving the drop-in's documents of every guest as static files (the machine's
    ceiling for any server: wrk's own share of the cores and the kernel's loopback); the
    storm's scenario is measured here, the warm one by warm()."""
    done = step("nginx: the drop-in's documents of every guest as static files")
    port = int(chosen.urls["dropin"].rsplit(":", 1)[1])
    tree = fetch_documents(port, guests, PATHS, tmp / "static")
    if set(tree.statuses) != {200}:
        run.notes.append(f"The drop-in's documents for nginx: statuses {dict(tree.statuses)}")
    with running_nginx(tree.root, tmp / "nginx", workers=run.args.workers) as url:
        done()
        yield url


def warm(run: Run, urls: dict[str, tuple[str, str]], tmp: Path, guest: str, project: str) -> None:
    """``urls``: name -> (URL, wrk target kind), measured in this order in every round."""
    args = run.args
    # One guest, once per wrk thread: the Lua script shares guests out among threads.
    files = write_storm_files(tmp / "warm", [guest] * args.threads, PATHS, project=project)
    for connections in WARM_CONNECTIONS:
        scenario = warm_scenario(connections)
        command_args = argparse.Namespace(threads=args.threads, connections=connections)
        rounds: dict[str, list[WrkResult]] = {name: [] for name in urls}
        for round_ in range(args.rounds):
            for name, (url, kind) in urls.items():
                step(f"{scenario}: {name}, round {round_ + 1}")
                command = wrk_command(command_args, url, kind, files, args.duration, False)
                rounds[name].append(run_wrk(name, command))
        for name, results in rounds.items():
            note = f"best of {args.rounds} rounds of {args.duration:g} s"
            run.add(measurement(scenario, name, best(results), note))
        run.loads.append(load_average())


def database_time(run: Run, nova: nova_peer.Nova) -> None:
    """The database's own time for the drop-in's poll on this deployment's cell1
    (bench/nova_dropin_idle.py), PostgreSQL only (SQLite: no statement while idle)."""
    if run.backend != "postgresql":
        return
    run.poll = nova_dropin_idle.measure(nova.database_urls["cell1"], polls=50)


def run_all(run: Run, tmp: Path) -> None:
    args = run.args
    servers = ["uwsgi", *([] if args.no_gunicorn else ["gunicorn"]), "dropin"]
    with deployment(run, tmp) as (nova, guests):
        # The metadata proxy's secret of nova.conf signs wrk's (and nginx's fetch's) headers.
        storm_identity.SECRET = nova.secret
        storm_identity.PROJECT = nova.project_id
        with targets(nova, args.workers, servers) as chosen:
            for server in servers[:-1]:
                chosen.start(server)
            run.loads.append(load_average())
            run.idle = measure_idle(chosen, run.backend, args.idle_seconds, tmp)
            database_time(run, nova)
            files = write_storm_files(tmp / "storm", guests, PATHS, project=nova.project_id)
            cold(run, chosen, files, len(guests), tmp)
            if args.boot_seconds >= 0:
                cell = nova.database_urls["cell1"]
                just_gone_active(run, chosen, files, guests, cell, tmp)
            with ceiling(run, chosen, tmp, guests) as nginx:
                storm_pass(
                    run,
                    storm_scenario(len(guests), args.storm_connections),
                    NGINX,
                    nginx,
                    "nginx",
                    files,
                    args.storm_connections,
                )
                if args.boot_seconds >= 0:  # the same requests: the same ceiling
                    ceiling_row = run.results[-1]
                    run.add(
                        dataclasses.replace(
                            ceiling_row,
                            scenario=storm_scenario(
                                len(guests), args.storm_connections, just_active=True
                            ),
                            note=ceiling_row.note + " (the cold storm's pass)",
                        )
                    )
                urls = {run.name(s): (chosen.urls[s], "cloudseed") for s in servers}
                warm(run, {**urls, NGINX: (nginx, "nginx")}, tmp, guests[0], nova.project_id)
            missed = [v for v in verdicts(run.results) if v.ratio_met is False or not v.p99_met]
            if missed and not args.no_profile:
                chosen.stop_all()  # the profile's drop-in alone on the cores
                parts = [
                    nova_dropin_profile.profile(nova, tmp, guests[0], args.duration, args.threads)
                ]
                if any(v.scenario.startswith(STORM_PREFIX) for v in missed):
                    parts.append(nova_dropin_profile.cold_loads(nova, guests))
                run.profile = "\n\n".join(p for p in parts if p)
        run.loads.append(load_average())


# --- the report -----------------------------------------------------------------------------------


def section(run: Run, chart_path: Path, doc: Path) -> str:
    args = run.args
    command = shlex.join(["python", "bench/nova_dropin.py", *sys.argv[1:]])
    link = os.path.relpath(chart_path, doc.parent)
    poll = (
        f" On this deployment's cell1 ({args.guests:,} instances more than the proof's) "
        f"PostgreSQL spends {run.poll['server_fast_ms']:.2f} ms on a poll and "
        f"{run.poll['server_slow_ms']:.2f} ms on every tenth (EXPLAIN ANALYZE medians; "
        f"{run.poll['statements_per_poll']:.0f} statement per poll; bench/nova_dropin_idle.py)."
        if run.poll
        else ""
    )
    idle = run.idle
    idle_part = (
        [
            f"### Idle: database queries per node ({idle.seconds:.0f} s without requests)",
            "",
            idle_table(idle),
            "",
            "Transactions are PostgreSQL's own counters (`xact_commit + xact_rollback` in "
            "pg_stat_database, per Nova database, after a VACUUM ANALYZE of each: "
            "autovacuum's transactions count there too), first with Nova's metadata servers "
            "alone (uwsgi, gunicorn, and the deployment's own gunicorn metadata and compute "
            "API), then with the drop-in too; the difference is the drop-in's, up to the "
            "server's background work in either window. Statements are counted in the "
            "drop-in's processes as SQLAlchemy sends them "
            "(bench/nova_dropin_hooks/sitecustomize.py; pool pre-pings are not statements "
            "there, and neither is SQLite's `PRAGMA data_version`). Nova's metadata API sends "
            "nothing while idle: it rereads an instance only when its cache entry has expired "
            "and a guest asks again." + poll,
            "",
        ]
        if idle is not None
        else []
    )
    loads = f"{run.loads[0]} at the start, {run.loads[-1]} at the end" if run.loads else "?"
    return "\n".join(
        [
            "## Nova drop-in side by side (issue 31)",
            "",
            f"`{command}` (`make bench-nova-dropin`) on "
            f"{time.strftime('%Y-%m-%d', time.gmtime())}: {cpu_model()}, {os.cpu_count()} "
            f"cores shared with other work, Python {platform.python_version()}, Nova 34.0.0 "
            f"from PyPI on {run.backend} (tests/support/nova_peer.py, `[api] "
            "metadata_cache_expiration = 15`, Nova's default), every server with "
            f"{args.workers} worker processes on the same `nova.conf` and databases, "
            f"`wrk -t{args.threads}` on the same cores. **Load average {loads}** (1, 5 and "
            "15 minutes).",
            "",
            f"![cloudseed nova-metadata beside Nova 34's metadata API]({link})",
            "",
            f"Targets: {WARM_GOAL:g}x Nova's best server with one warm guest, {STORM_GOAL:g}x "
            f"in the boot storms, p99 under {P99_GOAL_MS:g} ms. The storm of instances just "
            f"gone ACTIVE: Nova's last write of each instance after the servers started, "
            f"then {args.boot_seconds:g} s before their guests ask (bench/nova_dropin_storms.py)"
            "; the cold one: every server restarted with nothing cached or loaded at start, "
            "all the guests on one compute host (a host that came back: the drop-in loads its "
            "other guests ahead after three misses, `host_boot_misses`); first contacts only: "
            "the drop-in with that off too, each guest's first request waiting for its load.",
            "",
            targets_table(run.results),
            "",
            "<details><summary>Every server</summary>",
            "",
            results_table(run.results),
            "",
            "</details>",
            "",
            *idle_part,
            *([run.profile, ""] if run.profile else []),
            *[f"- {note}" for note in run.notes],
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["auto", "postgresql", "sqlite"], default="auto")
    parser.add_argument("--guests", type=int, default=2000, help="instances in the storm")
    parser.add_argument("--workers", type=int, default=2, help="processes of every server")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per warm round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--storm-connections", type=int, default=64)
    parser.add_argument(
        "--storm-seconds",
        type=float,
        default=240.0,
        help="a server's time limit in the storm (Nova's cold path may not reach every guest)",
    )
    parser.add_argument(
        "--dropin-storm-connections",
        type=int,
        default=8,
        help="the drop-in's cold storm once more at this many connections (0: not)",
    )
    parser.add_argument(
        "--boot-seconds",
        type=float,
        default=5.0,
        help="between Nova's last writes (instances ACTIVE) and their guests' storm (-1: no "
        "such storm)",
    )
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-gunicorn", action="store_true", help="Nova under uwsgi only")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--write", type=Path, help="the Markdown file to update")
    parser.add_argument("--chart", type=Path, default=Path("docs/img/nova-dropin.png"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tool("wrk", "wrk")
    require_tool("nginx", "nginx-light")
    run = Run(args, loads=[load_average()])
    try:
        with tempfile.TemporaryDirectory(prefix="nova-dropin-") as tmp:
            run.backend = choose_backend(args.backend, Path(tmp))
            run_all(run, Path(tmp))
    except nova_peer.NovaUnavailable as exc:
        print(f"skipped: Nova cannot be installed ({exc})", file=sys.stderr)
        return 2
    print(results_table(run.results))
    print(targets_table(run.results))
    if run.idle is not None:
        print(idle_table(run.idle))
    print(run.profile)
    print("\n".join(f"- {note}" for note in run.notes))
    if args.write:
        drawn = chart(
            run.results,
            args.chart,
            f"cloudseed nova-metadata beside Nova 34's metadata API ({run.backend}, "
            f"{args.workers} workers each)",
        )
        write_section(args.write, START, END, section(run, drawn, args.write))
    return 0


if __name__ == "__main__":
    sys.exit(main())
