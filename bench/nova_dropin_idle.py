"""What the drop-in's change watch (``cloudseed nova-metadata``, nova_metadata/changes.py) costs
Nova's database while nothing changes: statements per second per worker, and the database's
time per poll, with ``--instances`` instances in a cell (Nova's tables as the drop-in declares
them, nova_metadata/schema.py, filled the way Nova fills them: each instance with its extra,
info cache, ``--items`` metadata items, 20 system metadata items and a root block device;
``--deleted`` more instances deleted before, as a cloud that never archives keeps them).

For each backend that answers (PostgreSQL, MariaDB; SQLite costs no query when idle: a poll
asks PRAGMA data_version first), the database is filled, one watch starts as a worker's does,
and ``--polls`` polls are timed from the client (the statement's round trip on loopback: the
database's work plus a few tens of microseconds); every tenth is the slow one (5 s apart in
service, the tables that change rarely alone). Statements are counted as they are sent.

    .venv/bin/python bench/nova_dropin_idle.py [--instances 10000] [--polls 200]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, insert, text, union_all

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cloudseed.nova_metadata import changes, schema
from cloudseed.nova_metadata.databases import driver_url, open_database
from tests.support import databases

BATCH = 2000


def fill(url: str, instances: int, items: int, deleted: int) -> None:
    engine = create_engine(driver_url(url))
    schema.cell.create_all(engine)
    # Stamps spread over the last days, one instance changed every 13 s: the newest is old
    # enough for the watch's look-back window to hold none of them.
    first = schema.utcnow() - dt.timedelta(seconds=13 * (instances + deleted) + 60)
    with engine.begin() as c:
        for start in range(0, instances + deleted, BATCH):
            numbers = range(start, min(start + BATCH, instances + deleted))
            ids = [str(uuid.uuid4()) for _ in numbers]
            stamps = [first + dt.timedelta(seconds=13 * n) for n in numbers]
            gone = start >= instances
            c.execute(
                insert(schema.instances),
                [
                    {
                        "uuid": u,
                        "created_at": old,
                        "updated_at": old,
                        "deleted": n + 1 if gone else 0,  # Nova's deleted = the row's id
                        "deleted_at": old if gone else None,
                        "project_id": "p",
                        "hostname": "h",
                    }
                    for u, old, n in zip(ids, stamps, numbers, strict=True)
                ],
            )
            c.execute(
                insert(schema.instance_extra),
                [
                    {"instance_uuid": u, "created_at": old, "updated_at": old, "deleted": 0}
                    for u, old in zip(ids, stamps, strict=True)
                ],
            )
            c.execute(
                insert(schema.instance_info_caches),
                [
                    {"instance_uuid": u, "created_at": old, "updated_at": old, "network_info": "[]"}
                    for u, old in zip(ids, stamps, strict=True)
                ],
            )
            c.execute(
                insert(schema.instance_metadata),
                [
                    {
                        "instance_uuid": u,
                        "key": f"k{i}",
                        "value": "v",
                        "created_at": old,
                        "deleted": 0,
                    }
                    for u, old in zip(ids, stamps, strict=True)
                    for i in range(items)
                ],
            )
            c.execute(
                insert(schema.instance_system_metadata),
                [
                    {
                        "instance_uuid": u,
                        "key": f"s{i}",
                        "value": "v",
                        "created_at": old,
                        "deleted": 0,
                    }
                    for u, old in zip(ids, stamps, strict=True)
                    for i in range(20)
                ],
            )
            c.execute(
                insert(schema.block_device_mapping),
                [
                    {
                        "instance_uuid": u,
                        "source_type": "image",
                        "destination_type": "local",
                        "device_name": "/dev/vda",
                        "created_at": old,
                        "deleted": 0,
                    }
                    for u, old in zip(ids, stamps, strict=True)
                ],
            )
    engine.dispose()


def server_ms(db: Any, statement: Any) -> float:
    """The database's own time for ``statement`` (PostgreSQL's EXPLAIN ANALYZE, MariaDB's
    ANALYZE): the cost without this busy machine's client and scheduling noise."""
    sql = str(statement.compile(db.engine, compile_kwargs={"literal_binds": True}))
    with db.engine.connect() as c:
        if db.engine.dialect.name == "postgresql":
            plan = c.execute(text("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)).scalar()
            return float(plan[0]["Execution Time"])
        report = json.loads(c.execute(text("ANALYZE FORMAT=JSON " + sql)).scalar())
        return float(_total_ms(report))


def _total_ms(node: Any) -> float:
    """MariaDB's ANALYZE: the query block's r_total_time_ms, or its parts' sum (a UNION)."""
    if isinstance(node, dict):
        if "r_total_time_ms" in node and "query_block" not in node:
            return float(node["r_total_time_ms"])
        return sum(_total_ms(v) for v in node.values())
    if isinstance(node, list):
        return sum(_total_ms(v) for v in node)
    return 0.0


def measure(url: str, polls: int) -> dict[str, Any]:
    db = open_database("cell1", url)
    sent = [0]

    @event.listens_for(db.engine, "before_cursor_execute")
    def count(*_args: Any) -> None:
        sent[0] += 1

    watch = changes.NovaChanges(lambda: [db], interval=0.5)
    watch.add_cells()
    cell = next(iter(watch._cells.values()))
    fast: list[float] = []
    slow: list[float] = []
    sent[0] = 0
    for _ in range(polls):
        started = time.perf_counter()
        watch.poll_once([cell])
        elapsed = (time.perf_counter() - started) * 1000
        (slow if cell.polls % changes.SLOW_EVERY == 1 else fast).append(elapsed)
    statements = sent[0] / polls
    server = {}
    for kind in ("fast", "slow"):
        queries = [
            watch._query(w, cell.cursors[w.name])
            for w in changes.WATCHED
            if kind == "slow" or not w.slow
        ]
        server[kind] = statistics.median(server_ms(db, union_all(*queries)) for _ in range(20))
    db.dispose()
    return {
        "statements_per_poll": statements,
        "fast_ms": statistics.median(fast),
        "slow_ms": statistics.median(slow),
        "server_fast_ms": server["fast"],
        "server_slow_ms": server["slow"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=3)
    parser.add_argument("--deleted", type=int, default=10_000)
    parser.add_argument("--polls", type=int, default=200)
    args = parser.parse_args()
    per_second = 1 / 0.5
    print(
        f"{args.instances} instances ({args.items} metadata items, 20 system metadata items "
        f"each), {args.deleted} deleted; a poll every 0.5 s, the slow tables every "
        f"{changes.SLOW_EVERY}th"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("postgresql", "mariadb"):
            try:
                with databases.scratch_database(backend, tmp) as url:
                    started = time.monotonic()
                    fill(url, args.instances, args.items, args.deleted)
                    filled = time.monotonic() - started
                    result = measure(url, args.polls)
            except databases.Unavailable as exc:
                print(f"{backend}: skipped ({exc})")
                continue
            busy = (
                (result["server_fast_ms"] * (changes.SLOW_EVERY - 1) + result["server_slow_ms"])
                / changes.SLOW_EVERY
                * per_second
            )
            print(
                f"{backend}: {result['statements_per_poll']:.2f} statements per poll = "
                f"{result['statements_per_poll'] * per_second:.1f}/s per worker and cell; "
                f"the database's time for a poll {result['server_fast_ms']:.2f} ms, the slow "
                f"one {result['server_slow_ms']:.2f} ms (medians; round trips seen by the "
                f"client {result['fast_ms']:.1f} and {result['slow_ms']:.1f} ms on this busy "
                f"machine): {busy:.1f} ms of database time per second per worker and cell "
                f"(filled in {filled:.0f} s)"
            )


if __name__ == "__main__":
    main()
