"""Operations benchmark: servers built per second through the API with 1 and 2 compute agents,
the time from SIGKILL of an agent to every interrupted instance being final, and the database
load of idle agents, on PostgreSQL (a fresh database, real processes: ``cloudseed serve
--no-compute`` and ``cloudseed compute --host``, the fake driver without delay).

1. throughput: ``--servers`` servers created by ``--concurrency`` concurrent clients (one
   request each, admins placing them round-robin on the agents' hosts), timed from the first
   request until every server is ACTIVE;
2. recovery: ``--interrupted`` servers on one agent whose fake driver takes 5 s per spawn;
   the agent is killed with SIGKILL while they build and started again; timed from the kill
   until all are ACTIVE or ERROR (lease ``--lease`` seconds);
3. idle load: transactions per second on the database (``pg_stat_database.xact_commit``
   deltas over ``--idle-seconds``): the API node alone, its metadata change feed polling every
   20 ms (``[metadata] change_fallback_interval_ms = 20``, what SQLite and MariaDB do) and on
   LISTEN/NOTIFY (the default); then with 1, 4 and 16 idle agents, polling every second
   (``[compute] poll_interval_ms = 1000``) and waiting for NOTIFY (poll once a minute).

Usage (repository root, the project's venv)::

    .venv/bin/python bench/operations.py [--servers 200] [--write docs/benchmarks.md]

``--idle-only`` measures the idle load alone and keeps the other rows of the section already
in the ``--write`` file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

# The cluster helpers of the test suite drive the processes (tests/support/cluster.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import cpu_model, write_section

from tests.support.cluster import (
    ADMIN,
    Cluster,
    registered,
    running_cluster,
    status_is,
    wait,
)

# Quotas are not what is measured.
UNLIMITED = {f"CLOUDSEED_QUOTA__{r}": "-1" for r in ("INSTANCES", "CORES", "RAM")}

START, END = "<!-- bench:operations:start -->", "<!-- bench:operations:end -->"


async def _create_many(
    cluster: Cluster, hosts: list[str], count: int, concurrency: int
) -> list[str]:
    limit = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=cluster.api, headers=ADMIN, timeout=60) as client:

        async def one(i: int) -> str:
            body = {"server": {"name": f"vm{i}", "imageRef": "cirros", "flavorRef": "1",
                               "networks": "none", "host": hosts[i % len(hosts)]}}  # fmt: skip
            async with limit:
                r = await client.post("/v2.1/servers", json=body)
            r.raise_for_status()
            server_id: str = r.json()["server"]["id"]
            return server_id

        return list(await asyncio.gather(*(one(i) for i in range(count))))


def _all_final(cluster: Cluster, ids: list[str]) -> bool:
    r = httpx.get(
        f"{cluster.api}/v2.1/servers/detail", headers=ADMIN, params={"limit": 10000}, timeout=60
    )
    states = {s["id"]: (s["status"], s["OS-EXT-STS:task_state"]) for s in r.json()["servers"]}
    return all(
        states.get(i, ("", None))[0] in ("ACTIVE", "ERROR") and states[i][1] is None for i in ids
    )


def throughput(tmp: Path, agents: int, servers: int, concurrency: int) -> float:
    tmp.mkdir(parents=True)
    with running_cluster(
        "postgresql", tmp, CLOUDSEED_COMPUTE__LEASE_SECONDS="20", **UNLIMITED
    ) as cluster:
        hosts = [f"h{n}" for n in range(agents)]
        for host in hosts:
            cluster.start_agent(host)
        for host in hosts:
            wait(lambda host=host: registered(cluster, host), 60, cluster, f"{host} registered")
        started = time.monotonic()
        ids = asyncio.run(_create_many(cluster, hosts, servers, concurrency))
        wait(lambda: _all_final(cluster, ids), 600, cluster, "all ACTIVE")
        return servers / (time.monotonic() - started)


def recovery(tmp: Path, count: int, lease: int) -> float:
    tmp.mkdir(parents=True)
    with running_cluster(
        "postgresql",
        tmp,
        CLOUDSEED_COMPUTE__LEASE_SECONDS=str(lease),
        CLOUDSEED_FAKE_DRIVER__DELAY_MS="5000",
        CLOUDSEED_MAX_CONCURRENT_BUILDS=str(count),
        **UNLIMITED,
    ) as cluster:
        cluster.start_agent("h0")
        wait(lambda: registered(cluster, "h0"), 60, cluster, "h0 registered")
        ids = asyncio.run(_create_many(cluster, ["h0"], count, count))
        time.sleep(1.5)  # they are all in the driver now
        cluster.kill("agent-h0")
        killed = time.monotonic()
        cluster.start_agent("h0")
        wait(lambda: _all_final(cluster, ids), 120, cluster, "all final")
        for server_id in ids:
            assert status_is(cluster, server_id, "ACTIVE")(), server_id
        return time.monotonic() - killed


def idle_load(
    tmp: Path, agents: int, notify: bool, seconds: float, *, feed_polls: bool = False
) -> float:
    tmp.mkdir(parents=True)
    poll = "60000" if notify else "1000"
    # feed_polls: the metadata feed reads every 20 ms even while its LISTEN connection is up.
    fallback = "20" if feed_polls else "1000"
    with running_cluster(
        "postgresql",
        tmp,
        CLOUDSEED_COMPUTE__POLL_INTERVAL_MS=poll,
        CLOUDSEED_METADATA__CHANGE_FALLBACK_INTERVAL_MS=fallback,
    ) as cluster:
        for n in range(agents):
            cluster.start_agent(f"h{n}")
        for n in range(agents):
            wait(lambda n=n: registered(cluster, f"h{n}"), 120, cluster, f"h{n} registered")
        time.sleep(3)
        engine = create_engine(cluster.url)
        name = cluster.url.rsplit("/", 1)[1]

        def commits() -> int:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                value = conn.execute(
                    text("SELECT xact_commit FROM pg_stat_database WHERE datname = :n"), {"n": name}
                ).scalar_one()
                return int(value)

        before = commits()
        time.sleep(seconds)
        after = commits()
        engine.dispose()
        return (after - before - 1) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--interrupted", type=int, default=20)
    parser.add_argument("--lease", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=20)
    parser.add_argument("--write", type=Path)
    parser.add_argument(
        "--idle-only", action="store_true", help="keep the other rows of the --write file"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.idle_only:
            rows = _earlier_rows(args.write)
        else:
            for agents in (1, 2):
                rate = throughput(root / f"t{agents}", agents, args.servers, args.concurrency)
                rows.append(f"| servers built per second, {agents} agent(s) | {rate:.1f} |")
                print(rows[-1], flush=True)
            took = recovery(root / "r", args.interrupted, args.lease)
            rows.append(
                f"| SIGKILL of an agent building {args.interrupted} servers to all ACTIVE "
                f"(lease {args.lease} s, 5 s per spawn) | {took:.1f} s |"
            )
            print(rows[-1], flush=True)
        for feed_polls in (True, False):
            rate = idle_load(
                root / f"api{feed_polls}", 0, True, args.idle_seconds, feed_polls=feed_polls
            )
            how = "polling every 20 ms" if feed_polls else "LISTEN/NOTIFY (read every second)"
            rows.append(
                f"| idle database transactions per second, API node alone, change feed {how} "
                f"| {rate:.1f} |"
            )
            print(rows[-1], flush=True)
        for agents in (1, 4, 16):
            for notify in (False, True):
                rate = idle_load(root / f"i{agents}{notify}", agents, notify, args.idle_seconds)
                how = "LISTEN/NOTIFY (poll once a minute)" if notify else "polling every second"
                label = f"idle database transactions per second, {agents} agent(s), {how}"
                rows.append(f"| {label} | {rate:.1f} |")
                print(rows[-1], flush=True)
    command = (
        f"`.venv/bin/python bench/operations.py --idle-only --idle-seconds "
        f"{args.idle_seconds:g} --write docs/benchmarks.md`"
        if args.idle_only
        else f"`.venv/bin/python bench/operations.py --servers {args.servers} --interrupted "
        f"{args.interrupted} --lease {args.lease} --idle-seconds {args.idle_seconds:g} "
        "--write docs/benchmarks.md`"
    )
    section = "\n".join(
        [
            "## Operations and compute hosts (PostgreSQL)",
            "",
            f"{command} on {cpu_model()}, {os.cpu_count()} CPUs; real processes (one "
            "`serve --no-compute`, agents with `cloudseed compute`), fake driver"
            + (" (the build and SIGKILL rows are from the last full run)" if args.idle_only else "")
            + ". The idle rows count every transaction on the database. The API node alone is "
            "its metadata change feed (each worker reads `guest_changes`: every 20 ms when it "
            "polls, as on SQLite and MariaDB; once a second on LISTEN/NOTIFY, the PostgreSQL "
            "default, or at once when a change commits) and its own registration; with the "
            "feed on NOTIFY, the rows with agents are the API node's share plus each agent's "
            "heartbeat every second (`report_interval = 1` here; 10 by default), and the "
            "difference between their polling and NOTIFY rows is what polling for work costs. "
            "Measured while other work ran on the same 2 CPUs.",
            "",
            "| measure | value |",
            "|---|---|",
            *rows,
        ]
    )
    print(section)
    if args.write:
        write_section(args.write, START, END, section)


def _earlier_rows(page: Path | None) -> list[str]:
    """The build and recovery rows of the section already written (``--idle-only``)."""
    if page is None or START not in (text_ := page.read_text()):
        raise SystemExit("--idle-only needs --write FILE holding an earlier full run")
    earlier = text_.split(START, 1)[1].split(END, 1)[0]
    return [
        line
        for line in earlier.splitlines()
        if line.startswith(("| servers built", "| SIGKILL of an agent"))
    ]


if __name__ == "__main__":
    main()
