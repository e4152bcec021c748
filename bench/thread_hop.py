"""What a route's database read costs besides the read: the hop to a worker thread and back.

A route awaits its transaction; drivers block, so the transaction runs in a worker thread
(``web/transactions.py``), except a read of SQLite, whose readers wait for no one, which runs
on the event loop. This measures, in one process, the CPU and wall time per call of a
one-row SQLite read three ways, with ``--tasks`` coroutines calling it at once:

- ``anyio``: Starlette's ``run_in_threadpool`` (anyio's ``to_thread.run_sync``), before;
- ``executor``: the event loop's ``run_in_executor`` on a pool of 40 threads with the
  caller's context (``web.transactions.in_thread``);
- ``inline``: the read called on the event loop.

Usage (from the repository root, with the project's venv)::

    .venv/bin/python bench/thread_hop.py [--calls 5000] [--tasks 1 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import sqlite3
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio.to_thread


def reader(path: Path) -> Callable[[], object]:
    """A one-row read on a connection of the calling thread's own."""
    local = threading.local()

    def read() -> object:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = sqlite3.connect(path)
        return connection.execute("SELECT value FROM t WHERE id = 1").fetchone()

    return read


async def measure(calls: int, tasks: int, rounds: int, path: Path) -> None:
    read = reader(path)
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(40)

    async def anyio_hop() -> object:
        return await anyio.to_thread.run_sync(read)

    async def executor_hop() -> object:
        return await loop.run_in_executor(pool, contextvars.copy_context().run, read)

    async def inline() -> object:
        return read()

    ways: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("anyio", anyio_hop),
        ("executor", executor_hop),
        ("inline", inline),
    ]
    for _ in range(rounds):
        for name, call in ways:

            async def caller(call: Callable[[], Awaitable[object]] = call) -> None:
                for _ in range(calls):
                    await call()

            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(caller() for _ in range(tasks)))
            total = calls * tasks
            print(
                f"{tasks} task(s), {name:8}: "
                f"{(time.process_time() - cpu) / total * 1e6:6.1f} us CPU, "
                f"{(time.perf_counter() - wall) / total * 1e6:6.1f} us wall per call",
                flush=True,
            )
    pool.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=5000, help="calls per task and way")
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cloudseed-hop-") as tmp:
        path = Path(tmp) / "hop.sqlite"
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, value TEXT)")
            connection.execute("INSERT INTO t VALUES (1, 'one')")
        for tasks in args.tasks:
            asyncio.run(measure(args.calls, tasks, args.rounds, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
