"""Servers created through the compute API: how long multi-creates take and the server's CPU per
server, until the creates are answered and until every server is ACTIVE (the agents' builds).

``cloudseed serve --workers 2`` with its compute agent on fresh SQLite databases, the storm's
servers (a key pair, cloud-config user data, 3 metadata items, one port), after a warm-up
multi-create. ``--before SRC`` measures a checkout's ``src/`` too (``git archive <commit> src |
tar -x -C /tmp/base``, then ``/tmp/base/src``), the two alternating round by round. Prints the
results; the notes in docs/benchmarks.md quote them.

    .venv/bin/python bench/creates.py --servers 1000 --batch 100 --concurrency 1 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import storm_identity
from storm_seeding import create_batches, import_key_pair, register, wait_until_active
from storm_server import code_from, running_server
from storm_workers import cpu_seconds

WARM_UP = 100  # servers created (and built) before the measurement


def one_round(args: argparse.Namespace, src: Path | None) -> str:
    with code_from(src), tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        registries = register(data)
        with running_server(data, 2) as server:
            pids = [server.process.pid, *server.worker_pids()]

            def cpu() -> float:
                return sum(cpu_seconds(pid) for pid in pids)

            with httpx.Client(base_url=server.api, headers=storm_identity.AUTH) as api:
                key = import_key_pair(api)
                asyncio.run(create_batches(server.api, registries, key, WARM_UP, WARM_UP, 1))
                wait_until_active(api, WARM_UP)
                cpu_start, started = cpu(), time.perf_counter()
                batches, refusals = asyncio.run(
                    create_batches(
                        server.api, registries, key, args.servers, args.batch, args.concurrency
                    )
                )
                cpu_created, created = cpu(), time.perf_counter()
                wait_until_active(api, WARM_UP + args.servers)
                cpu_active, active = cpu(), time.perf_counter()
    per_server = 1000 / args.servers
    return (
        f"creates {created - started:.2f} s (batch median {statistics.median(batches):.3f} s, "
        f"{len(refusals)} refused and posted again), server CPU "
        f"{(cpu_created - cpu_start) * per_server:.2f} ms per server; all ACTIVE after "
        f"{active - started:.2f} s, server CPU {(cpu_active - cpu_start) * per_server:.2f} ms "
        "per server"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100, help="servers per multi-create")
    parser.add_argument("--concurrency", type=int, default=1, help="multi-creates in flight")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--before", type=Path, help="a checkout's src/ to measure too")
    args = parser.parse_args()
    sides: list[tuple[str, Path | None]] = [("now", None)]
    if args.before is not None:
        sides.insert(0, ("before", args.before.resolve()))
    print(
        f"{args.servers:,} servers, multi-creates of {args.batch}, {args.concurrency} at a "
        f"time, {args.rounds} round(s); load average {os.getloadavg()}",
        flush=True,
    )
    for round_number in range(1, args.rounds + 1):
        for name, src in sides:
            print(f"round {round_number}, {name}: {one_round(args, src)}", flush=True)


if __name__ == "__main__":
    main()
