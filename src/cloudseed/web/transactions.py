"""A route's transaction: ``Database.run`` in a worker thread, awaited.

Database drivers block, so a route never runs a statement on the event loop; it validates,
awaits one ``in_transaction`` (or a domain's helper built on it, such as
``servers.api.requests.in_cell``) and renders what came back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

from sqlalchemy import Connection
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from cloudseed.db.engines import DEFAULT_ATTEMPTS, Database

T = TypeVar("T")


@overload
async def in_transaction(
    db: Database,
    work: Callable[[Session], T],
    *,
    write: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    serializable: bool = False,
    core: Literal[False] = False,
) -> T: ...


@overload
async def in_transaction(
    db: Database,
    work: Callable[[Connection], T],
    *,
    write: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    serializable: bool = False,
    core: Literal[True],
) -> T: ...


async def in_transaction(
    db: Database,
    work: Callable[[Any], T],
    *,
    write: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    serializable: bool = False,
    core: bool = False,
) -> T:
    """``db.run(work, ...)`` in a worker thread (see ``Database.run``)."""

    def run() -> T:
        if core:
            return db.run(
                work, write=write, attempts=attempts, serializable=serializable, core=True
            )
        return db.run(work, write=write, attempts=attempts, serializable=serializable)

    return await run_in_threadpool(run)
