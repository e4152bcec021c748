"""Bootstrap history versions within one transaction (``servers/history/bootstrap.py``): read once
per instance, then counted in memory, across the flushes other work in the transaction makes, and
read again in the next transaction."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.servers.history import bootstrap as history
from tests.support.instances import add_instance

ACTOR = history.Actor(user_id="u", project_id="p", request_id="req-1")


@contextmanager
def version_reads(db: Database) -> Iterator[list[str]]:
    """The statements that read an instance's last history version."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "max(" in statement.lower():
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def change(session: Any, uuid: str, n: int) -> None:
    history.record(
        session,
        instance_uuid=uuid,
        field="user_data",
        action="update",
        actor=ACTOR,
        old=json.dumps(n),
        new=json.dumps(n + 1),
    )


def test_versions_read_once_per_transaction(clean_cell_db: Database) -> None:
    first, second = add_instance(clean_cell_db), add_instance(clean_cell_db)
    with version_reads(clean_cell_db) as reads:

        def work(session: Session) -> None:
            for n in range(3):
                change(session, first, n)
                change(session, second, n)
                session.flush()  # as other work in the transaction does

        clean_cell_db.run(work, write=True)
        assert len(reads) == 2  # one per instance, not one per change
        clean_cell_db.run(lambda session: change(session, first, 3), write=True)
        assert len(reads) == 3  # a new transaction reads again: others may have written
    with clean_cell_db.read() as session:
        assert [c["version"] for c in history.history(session, first)] == [1, 2, 3, 4]
        assert [c["version"] for c in history.history(session, second)] == [1, 2, 3]
