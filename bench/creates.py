"""Servers created through the compute API: how long multi-creates take and the server's CPU per
server, until the creates are answered and until every server is ACTIVE (the agents' builds).

``cloudseed serve --workers 2`` with its compute agent on fresh SQLite databases, the storm's
servers (a key pair, cloud-config user data, 3 metadata items, one port), after a warm-up
multi-create. The builds run beside the creates there, so the CPU "over the creates" holds
some builds too; ``--apart`` adds a second reading that splits them: ``serve --no-compute`` and
a standalone ``cloudseed compute`` agent, stopped (SIGSTOP) while the creates run, so the
creates' CPU is theirs alone and the CPU from SIGCONT until every server is ACTIVE (agent and
serve) is the builds'. The agent's alone is printed too: serve's share is each worker loading
the built guests ahead, the change feed's polls and this bench's own polling. ``--before SRC``
measures a checkout's ``src/`` too (``git archive <commit> src | tar -x -C /tmp/base``, then
``/tmp/base/src``), the two alternating round by round. ``--sequential N`` measures instead
what the side-by-side's server create row does: single-server creates one after another, the
agent stopped, each one's latency and serve's CPU per create. Waiting for ACTIVE asks for one BUILD
server every 0.2 s (a page of 1,000 every 0.5 s was a tenth of the server's CPU). Prints the
results; the notes in docs/benchmarks.md quote them.

    .venv/bin/python bench/creates.py --servers 1000 --batch 100 --concurrency 1 --rounds 2
    .venv/bin/python bench/creates.py --sequential 300 --rounds 3 --before /tmp/base/src
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import storm_identity
from storm_seeding import Registries, create_batches, import_key_pair, register, wait_until_active
from storm_server import code_from, pause, running_server, standalone_agent
from storm_workers import cpu_seconds

ADMIN = {"X-Auth-Token": "admin:admin"}  # the registered host's list is for admins
NETWORKS_NONE = {"OpenStack-API-Version": "compute 2.37"}  # "networks": "none"
WARM_UP = 100  # servers created (and built) before the measurement


def wait_for_builds(api: httpx.Client, total: int) -> None:
    """Until no server is BUILD (one server asked for each time), then the full check."""
    deadline = time.monotonic() + 600
    while True:
        response = api.get("/v2.1/servers", params={"status": "BUILD", "limit": 1})
        response.raise_for_status()
        if not response.json()["servers"]:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("servers still building after 600 s")
        time.sleep(0.2)
    wait_until_active(api, total)


def until_active(api: httpx.Client, total: int, cpu: Callable[[], float]) -> tuple[float, float]:
    started, cpu_start = time.perf_counter(), cpu()
    wait_for_builds(api, total)
    return time.perf_counter() - started, cpu() - cpu_start


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
                wait_for_builds(api, WARM_UP)
                cpu_start, started = cpu(), time.perf_counter()
                batches, refusals = asyncio.run(
                    create_batches(
                        server.api, registries, key, args.servers, args.batch, args.concurrency
                    )
                )
                cpu_created, created = cpu(), time.perf_counter()
                wait_for_builds(api, WARM_UP + args.servers)
                cpu_active, active = cpu(), time.perf_counter()
    per_server = 1000 / args.servers
    return (
        f"creates {created - started:.2f} s (batch median {statistics.median(batches):.3f} s, "
        f"{len(refusals)} refused and posted again), server CPU "
        f"{(cpu_created - cpu_start) * per_server:.2f} ms per server; all ACTIVE after "
        f"{active - started:.2f} s, server CPU {(cpu_active - cpu_start) * per_server:.2f} ms "
        f"per server ({(cpu_active - cpu_created) * per_server:.2f} after the creates)"
    )


def warmed_up_then_paused(
    api: httpx.Client,
    base: str,
    registries: Registries,
    agent: subprocess.Popen[bytes],
    data: Path,
) -> str:
    """Once the standalone ``agent`` has registered: a key pair, ``WARM_UP`` servers created
    and built, then the agent stopped (``pause``); the key pair's name."""
    key = import_key_pair(api)
    deadline = time.monotonic() + 60
    while not api.get("/v2.1/os-hypervisors", headers=ADMIN).json().get("hypervisors"):
        if time.monotonic() > deadline:
            raise RuntimeError("the agent did not register in 60 s")
        time.sleep(0.2)
    asyncio.run(create_batches(base, registries, key, WARM_UP, WARM_UP, 1))
    wait_for_builds(api, WARM_UP)
    pause(agent, data)
    return key


def one_round_apart(args: argparse.Namespace, src: Path | None) -> str:
    """The creates with the agent stopped, then its builds: each one's CPU alone."""
    with code_from(src), tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        registries = register(data)
        with running_server(data, 2, compute=False) as server, standalone_agent(data) as agent:
            serve_pids = [server.process.pid, *server.worker_pids()]

            def serve_cpu() -> float:
                return sum(cpu_seconds(pid) for pid in serve_pids)

            def all_cpu() -> float:
                return serve_cpu() + cpu_seconds(agent.pid)

            with httpx.Client(base_url=server.api, headers=storm_identity.AUTH) as api:
                key = warmed_up_then_paused(api, server.api, registries, agent, data)
                cpu_start, started = serve_cpu(), time.perf_counter()
                asyncio.run(
                    create_batches(
                        server.api, registries, key, args.servers, args.batch, args.concurrency
                    )
                )
                create_cpu, created = serve_cpu() - cpu_start, time.perf_counter() - started
                agent_start = cpu_seconds(agent.pid)
                agent.send_signal(signal.SIGCONT)
                build_seconds, build_cpu = until_active(api, WARM_UP + args.servers, all_cpu)
                agent_cpu = cpu_seconds(agent.pid) - agent_start
    per_server = 1000 / args.servers
    return (
        f"agent apart: creates {created:.2f} s, server CPU {create_cpu * per_server:.2f} ms per "
        f"server; builds {build_seconds:.2f} s, CPU (agent and serve) "
        f"{build_cpu * per_server:.2f} ms per server = {build_cpu / create_cpu:.2f} creates; "
        f"the agent alone {agent_cpu * per_server:.2f} ms = {agent_cpu / create_cpu:.2f} creates"
    )


def one_round_sequential(args: argparse.Namespace, src: Path | None) -> str:
    """``--sequential N``: N creates of one server, one after the other on one connection, with
    the agent registered and stopped (as the side-by-side's server create row): the latency
    of each and serve's CPU per create."""
    with code_from(src), tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        registries = register(data)
        with running_server(data, 2, compute=False) as server, standalone_agent(data) as agent:
            serve_pids = [server.process.pid, *server.worker_pids()]
            with httpx.Client(base_url=server.api, headers=storm_identity.AUTH) as api:
                key = warmed_up_then_paused(api, server.api, registries, agent, data)
                body = {
                    "server": {
                        "imageRef": registries.image,
                        "flavorRef": registries.flavor,
                        "networks": "none",
                        "key_name": key,
                        "user_data": base64.b64encode(b"#cloud-config\n").decode(),
                        "metadata": {"a": "1", "b": "2", "c": "3"},
                    }
                }
                cpu_start = sum(cpu_seconds(pid) for pid in serve_pids)
                latencies = []
                for index in range(args.sequential):
                    body["server"]["name"] = f"one-by-one-{index}"
                    started = time.perf_counter()
                    response = api.post("/v2.1/servers", json=body, headers=NETWORKS_NONE)
                    latencies.append((time.perf_counter() - started) * 1000)
                    if response.status_code != 202:
                        raise RuntimeError(f"create refused: {response.text}")
                cpu = sum(cpu_seconds(pid) for pid in serve_pids) - cpu_start
    latencies.sort()
    n = len(latencies)
    return (
        f"{n} creates one by one: median {statistics.median(latencies):.2f} ms, p90 "
        f"{latencies[int(n * 0.9)]:.2f}, p99 {latencies[int(n * 0.99)]:.2f}, max "
        f"{latencies[-1]:.2f}; server CPU {cpu * 1000 / n:.2f} ms per create"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100, help="servers per multi-create")
    parser.add_argument("--concurrency", type=int, default=1, help="multi-creates in flight")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--before", type=Path, help="a checkout's src/ to measure too")
    parser.add_argument(
        "--apart", action="store_true", help="also: the agent stopped during the creates"
    )
    parser.add_argument(
        "--sequential",
        type=int,
        metavar="N",
        help="instead: N single-server creates one by one, the agent stopped",
    )
    args = parser.parse_args()
    sides: list[tuple[str, Path | None]] = [("now", None)]
    if args.before is not None:
        sides.insert(0, ("before", args.before.resolve()))
    measured = (
        f"{args.sequential:,} single-server creates one by one"
        if args.sequential
        else f"{args.servers:,} servers, multi-creates of {args.batch}, "
        f"{args.concurrency} at a time"
    )
    print(f"{measured}, {args.rounds} round(s); load average {os.getloadavg()}", flush=True)
    for round_number in range(1, args.rounds + 1):
        for name, src in sides:
            if args.sequential:
                result = one_round_sequential(args, src)
                print(f"round {round_number}, {name}: {result}", flush=True)
                continue
            print(f"round {round_number}, {name}: {one_round(args, src)}", flush=True)
            if args.apart:
                print(f"round {round_number}, {name}: {one_round_apart(args, src)}", flush=True)
    print(f"load average {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
