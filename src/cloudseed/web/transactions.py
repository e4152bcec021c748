"""A route's transaction: ``Database.run``, awaited.

A route validates, awaits one ``in_transaction`` (or a domain's helper built on it, such as
``servers.api.requests.in_cell``) and renders what came back. Database drivers block, so the
transaction runs in a worker thread, with one exception: a read of a database whose reads
wait for nobody (``Database.local_reads``: SQLite in WAL mode) runs on the event loop. The hop
to a thread and back costs 90-125 us of CPU (two thread wake-ups and the loop's self-pipe), 20
times a one-row read in SQLite (4-5 us), and the GIL would keep the loop waiting while the
thread ran the read anyway (``bench/thread_hop.py``). Writes always take a thread: SQLite's
writers queue on a lock.

The hop is ``in_thread``: the event loop's ``run_in_executor`` on a pool of this process's own,
with the caller's context variables; Starlette's ``run_in_threadpool`` (anyio's ``to_thread``,
with its capacity limiter and worker bookkeeping) cost 95-125 us of CPU per hop against
89-95 here.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar, overload

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from cloudseed.db.engines import DEFAULT_ATTEMPTS, Database, Isolation

T = TypeVar("T")

# As many threads as anyio's default limiter allowed: each holds at most one pooled
# connection while it runs, and the rest wait their turn in the pool's queue.
THREADS = 40
_pool: tuple[int, ThreadPoolExecutor] | None = None


def _executor() -> ThreadPoolExecutor:
    """This process's pool, made on first use: a pool made before ``serve`` forks its
    workers would have no threads in them."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(THREADS, thread_name_prefix="cloudseed-db"))
    return _pool[1]


async def in_thread(work: Callable[[], T]) -> T:
    """``work()`` in a worker thread of this process's pool, awaited; it sees the caller's
    context variables."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_executor(), context.run, work)


@overload
async def in_transaction(
    db: Database,
    work: Callable[[Session], T],
    *,
    write: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    isolation: Isolation = Isolation.DEFAULT,
    core: Literal[False] = False,
) -> T: ...


@overload
async def in_transaction(
    db: Database,
    work: Callable[[Connection], T],
    *,
    write: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    isolation: Isolation = Isolation.DEFAULT,
    core: Literal[True],
) -> T: ...


async def in_transaction(
    db: Database,
    work: Callable[[Any], T],
    *,
    write: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    isolation: Isolation = Isolation.DEFAULT,
    core: bool = False,
) -> T:
    """``db.run(work, ...)`` (see ``Database.run``): on the event loop for a read of a
    database with local reads, else in a worker thread."""

    def run() -> T:
        if core:
            return db.run(work, write=write, attempts=attempts, isolation=isolation, core=True)
        return db.run(work, write=write, attempts=attempts, isolation=isolation)

    if not write and db.local_reads:
        return run()
    return await in_thread(run)
