"""Cold boot storms of one checkout against another, alternating on one machine, each storm
followed by nginx serving the same guests' documents: is a change to a guest's first requests
faster, beyond the machine's noise?

A storm's requests/s moved by a fifth between runs of the same code here (docs/benchmarks.md,
issue 36), more than most changes are worth, so one run measures both sides, storm after
storm, and reports each storm beside nginx's on the same documents just after it:

1. one fresh SQLite state; ``--guests`` x ``--rounds`` x (1, or 2 with ``--before``) servers
   created through the compute API (storm_seeding's multi-create, a key pair and user data
   each) by a ``cloudseed serve`` that is then stopped;
2. one ``cloudseed serve --workers 2 --no-compute`` per checkout, both up at once on that
   state: each loads every guest ahead when it starts (``load_ahead_seconds`` 600: they were
   all built within it), as a serving node has the guests it just built;
3. each round, each checkout in turn (the order swapped every round), once the machine is
   idle: one wrk pass of ``--guests`` guests no server has answered yet, every guest's 8 paths
   once (a first contact each, and a first key delivery to record), then nginx on those
   documents, fetched from cloudseed.

    .venv/bin/python bench/cold_storms.py [--before /tmp/base/src] [--guests 500]
        [--rounds 3] [--storm-seconds 15]

The medians per checkout (requests/s, and the ratio to nginx's storm just after) are printed;
nothing is written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

from storm_crawl import CLOUD_INIT_PATHS
from storm_host import require_tool, step, wait_until_idle
from storm_nginx import fetch_documents, running_nginx
from storm_seeding import register, seed
from storm_server import Server, code_from, running_server
from storm_wrk import run_wrk_one_cycle, write_storm_files, wrk_command

LOAD_AHEAD_SECONDS = 600  # the most [metadata] load_ahead_seconds allows
# One vCPU each on the seeder's one fake host: 1,000 vCPUs at allocation ratio 16
# (storm_server); the servers seeded beyond go to ERROR, "No valid host".
FAKE_HOST_GUESTS = 16_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout's src/, measured too")
    parser.add_argument("--guests", type=int, default=500, help="guests per storm")
    parser.add_argument("--rounds", type=int, default=3, help="storms per checkout")
    parser.add_argument("--storm-seconds", type=int, default=15, help="wrk -d, a storm's cap")
    parser.add_argument("--connections", type=int, default=256, help="wrk -c")
    parser.add_argument("--threads", type=int, default=2, help="wrk -t")
    args = parser.parse_args(argv)
    if min(args.guests, args.rounds, args.storm_seconds) < 1 or args.guests < args.threads:
        parser.error("counts must be positive, and --guests at least --threads")
    if args.guests * args.rounds * (2 if args.before else 1) > FAKE_HOST_GUESTS:
        parser.error(f"the fake host holds {FAKE_HOST_GUESTS:,} guests: fewer --guests or --rounds")
    return args


def storm(args: argparse.Namespace, url: str, target: str, guests: list[str], tmp: Path) -> float:
    """One wrk pass over every guest's paths once; its requests/s."""
    files = write_storm_files(tmp, guests, CLOUD_INIT_PATHS)
    command = wrk_command(args, url, target, files, args.storm_seconds, one_cycle=True)
    return run_wrk_one_cycle(target, command, args.threads).rps


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, list[tuple[float, float]]]:
    trees = {"this checkout": None, **({"--before": args.before} if args.before else {})}
    data_dir = tmp / "state"
    data_dir.mkdir()
    total = args.guests * args.rounds * len(trees)
    done = step(f"seeding {total:,} servers (SQLite, fake driver)")
    registries = register(data_dir)
    with running_server(data_dir, 2) as seeder:
        guests = seed(seeder, registries, total, batch=100, concurrency=1).instances
    done()
    sets = iter([guests[k : k + args.guests] for k in range(0, total, args.guests)])
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    with contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {}
        for name, src in trees.items():
            with code_from(src):
                servers[name] = stack.enter_context(
                    running_server(
                        data_dir, 2, compute=False, load_ahead_seconds=LOAD_AHEAD_SECONDS
                    )
                )
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for name in order:
                port = servers[name].metadata_port
                chosen = next(sets)
                waited = wait_until_idle()
                done = step(f"round {round_ + 1}: {name} (idle after {waited:.1f} s)")
                ours = storm(args, f"http://127.0.0.1:{port}", "cloudseed", chosen, tmp / "w1")
                done()
                where = tmp / f"static-{round_}-{name.strip('-').replace(' ', '-')}"
                tree = fetch_documents(port, chosen, CLOUD_INIT_PATHS, where / "documents")
                if set(tree.statuses) != {200}:
                    sys.exit(f"{name}: documents for nginx answered {dict(tree.statuses)}")
                with running_nginx(tree.root, where / "nginx", workers=2) as nginx_url:
                    wait_until_idle()
                    theirs = storm(args, nginx_url, "nginx", chosen, tmp / "w2")
                results[name].append((ours, theirs))
                for scratch in ("w1", "w2"):
                    for file in (tmp / scratch).iterdir():
                        file.unlink()
                    (tmp / scratch).rmdir()
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_tool("wrk", "wrk")
    require_tool("nginx", "nginx-light")
    with tempfile.TemporaryDirectory(prefix="cold-storms-") as tmp:
        os.chmod(tmp, 0o755)  # nginx runs as nobody (as root) and reaches its prefix below it
        results = measure(args, Path(tmp))
    print(f"\n{args.guests} guests a storm, {args.connections} connections; req/s (nginx after)")
    for name, storms in results.items():
        each = ", ".join(f"{ours:,.0f} ({theirs:,.0f})" for ours, theirs in storms)
        median = statistics.median(ours for ours, _ in storms)
        ratio = statistics.median(ours / theirs for ours, theirs in storms)
        print(f"  {name}: median {median:,.0f} req/s, {ratio:.1%} of nginx; storms: {each}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
