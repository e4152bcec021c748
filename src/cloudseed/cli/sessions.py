"""One transaction on the API database for a command: the command owns it (service functions
take the session and never commit), and it is committed or rolled back here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session

from cloudseed.cli.context import CliContext, errors_as_click, open_databases

T = TypeVar("T")


def write(cli: CliContext, fn: Callable[[Session], T]) -> T:
    """``fn(session)`` in one write transaction, committed if it returns (``Database.run``: run
    again if the database rolls it back, so ``fn`` only runs its statements)."""
    with open_databases(cli) as dbs, errors_as_click():
        return dbs.api.run(fn, write=True)


def read(cli: CliContext, fn: Callable[[Session], T]) -> T:
    """``fn(session)`` in one read-only transaction."""
    with open_databases(cli) as dbs, errors_as_click(), dbs.api.read() as session:
        return fn(session)
