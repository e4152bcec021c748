"""What an idle ``cloudseed serve --workers 2`` costs: each worker's CPU while nothing happens,
which on SQLite is the metadata change feed's polling (every 20 ms; PostgreSQL is told by
NOTIFY instead). The issue 19 budget is under 5 % of a core per worker.

One run: a SQLite state with ``--guests`` servers (bench/metadata_storm.py's seeding, or a
``--state`` directory it or bench/longpoll.py seeded), served with ``--no-compute`` (no agent
heartbeat), then each worker's user + system CPU from /proc over ``--seconds``, ``--rounds``
times. ``--before SRC`` runs the same against another checkout's ``src`` (``git archive REV
src``) for a comparison in the same run.

    .venv/bin/python bench/idle_feed.py [--guests 10000] [--state DIR] [--before SRC]
        [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from report import cpu_model, write_section
from storm_seeding import seeded_state
from storm_server import code_from, running_server
from storm_workers import cpu_seconds

MARKERS = "<!-- bench:idle-{}:start -->", "<!-- bench:idle-{}:end -->"


def idle_cpu(state: Path, seconds: float, settle: float, compute: bool) -> list[float]:
    """Per worker, % of a core while idle."""
    with running_server(state, 2, compute=compute) as server:
        time.sleep(settle)  # start-up work (feeds, first reads) done
        pids = server.worker_pids()
        before = {pid: cpu_seconds(pid) for pid in pids}
        started = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - started
        return [100 * (cpu_seconds(pid) - before[pid]) / elapsed for pid in pids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guests", type=int, default=10_000)
    parser.add_argument("--state", type=Path, help="a seeded state to copy (left unchanged)")
    parser.add_argument("--before", type=Path, help="another checkout's src, for comparison")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--compute", action="store_true", help="with the embedded compute agent (heartbeats)"
    )
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="idle-feed-") as tmp_name:
        tmp = Path(tmp_name)
        seeding = argparse.Namespace(
            instances=args.guests, workers=2, batch=200, create_concurrency=2, state=args.state
        )
        if args.state is not None:
            # A copy: the seeded state stays as it was for the benchmarks that made it.
            copy = tmp / "state"
            shutil.copytree(args.state, copy)
            seeding.state = copy
        state, seeded = seeded_state(seeding, tmp)
        sides = [("this checkout", None)]
        if args.before is not None:
            sides.append((f"before ({args.before})", args.before))
        results: dict[str, list[list[float]]] = {name: [] for name, _ in sides}
        loads = []
        for _ in range(args.rounds):
            for name, src in sides:
                loads.append(" ".join(Path("/proc/loadavg").read_text().split()[:3]))
                with code_from(src):
                    results[name].append(idle_cpu(state, args.seconds, 5.0, args.compute))
                print(name, ", ".join(f"{c:.2f} %" for c in results[name][-1]), flush=True)
    rows = [
        f"| {name} | "
        + "; ".join(", ".join(f"{c:.2f} %" for c in r) for r in runs)
        + f" | {max(max(r) for r in runs):.2f} % |"
        for name, runs in results.items()
    ]
    agent = ", compute agent" if args.compute else ""
    section = "\n".join(
        [
            f"## Idle cost: a worker's CPU with nothing to do (SQLite{agent})",
            "",
            f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
            f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}, "
            f"Python {platform.python_version()}; load average at the start of each run: "
            + "; ".join(loads),
            f"- Command: `.venv/bin/python bench/idle_feed.py {' '.join(sys.argv[1:])}`",
            f"- Server: `cloudseed serve --workers 2"
            f"{'' if args.compute else ' --no-compute'}`, SQLite, "
            f"{len(seeded.instances):,} servers; each worker's user + system CPU over "
            f"{args.seconds:.0f} s, after 5 s of start-up",
            "",
            "| code | each worker, each run (% of a core) | worst |",
            "|---|---|---:|",
            *rows,
        ]
    )
    print(section)
    if args.write is not None:
        kind = "agent" if args.compute else "feed"
        start, end = (marker.format(kind) for marker in MARKERS)
        write_section(args.write, start, end, section)


if __name__ == "__main__":
    main()
