"""Writes the database rolls back to break a deadlock run again (``db/engines.py``): two real
transactions locking two rows in opposite orders, on PostgreSQL and MariaDB."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.errors import WriteContended

TABLE = "write_retry_probe"


# SQLite queues its writers (BEGIN IMMEDIATE): two of them never hold a row each, so there is
# no deadlock to break there.
pytestmark = pytest.mark.parametrize("backend", ("postgresql", "mariadb"), indirect=True)


@pytest.fixture()
def db(cell_db: Database) -> Iterator[Database]:
    with cell_db.engine.begin() as connection:
        connection.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
        connection.execute(text(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, n INTEGER)"))
        connection.execute(text(f"INSERT INTO {TABLE} (id, n) VALUES (1, 0), (2, 0)"))
    yield cell_db
    with cell_db.engine.begin() as connection:
        connection.execute(text(f"DROP TABLE {TABLE}"))


class Crossing:
    """Two writers that each lock one row, wait until the other holds its row, then lock the
    other's: on their first runs the database must roll one of them back."""

    def __init__(self) -> None:
        self.both_hold_one = threading.Barrier(2, timeout=30)
        self.runs = {1: 0, 2: 0}
        self.lock = threading.Lock()

    def writer(self, first: int) -> Callable[[Any], int]:
        second = 3 - first

        def work(session: Session | Connection) -> int:  # the ORM's or Core's
            with self.lock:
                self.runs[first] += 1
                run = self.runs[first]
            bump = text(f"UPDATE {TABLE} SET n = n + 1 WHERE id = :id")
            session.execute(bump, {"id": first})
            if run == 1:  # only the first runs cross; a rerun goes straight through
                self.both_hold_one.wait()
            session.execute(bump, {"id": second})
            return run

        return work


def run_both(calls: list[Callable[[], object]]) -> list[Any]:
    outcomes: list[Any] = [None, None]

    def call(i: int) -> None:
        try:
            outcomes[i] = calls[i]()
        except Exception as exc:  # the outcome under test
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def counts(db: Database) -> list[int]:
    with db.engine.connect() as connection:
        return list(connection.scalars(text(f"SELECT n FROM {TABLE} ORDER BY id")))


def test_a_deadlocked_write_runs_again_and_both_land(db: Database) -> None:
    crossing = Crossing()
    outcomes = run_both(
        [
            lambda: db.retried_write(crossing.writer(1), attempts=3),
            lambda: db.retried_write(crossing.writer(2), attempts=3),
        ]
    )
    # One went through on its first run, the other was rolled back and ran a second time.
    assert set(outcomes) == {1, 2}
    assert counts(db) == [2, 2]  # each writer's two updates, once each


def test_serialized_runs_again_too(db: Database) -> None:
    crossing = Crossing()
    outcomes = run_both(
        [
            lambda: db.serialized(crossing.writer(1)),
            lambda: db.serialized(crossing.writer(2)),
        ]
    )
    # At SERIALIZABLE, PostgreSQL may refuse the loser's second run too (the winner committed
    # after that run's snapshot was taken): it runs until it goes through.
    assert 1 in outcomes and max(outcomes) >= 2, outcomes
    assert counts(db) == [2, 2]


def test_out_of_attempts_is_a_409_and_leaves_nothing(db: Database) -> None:
    crossing = Crossing()
    outcomes = run_both(
        [
            lambda: db.retried_write(crossing.writer(1), attempts=1),
            lambda: db.retried_write(crossing.writer(2), attempts=1),
        ]
    )
    refused = [o for o in outcomes if isinstance(o, WriteContended)]
    assert len(refused) == 1 and 1 in outcomes, outcomes
    assert refused[0].message == "Concurrent requests changed the same records; try again."
    assert counts(db) == [1, 1]  # the winner's two updates; nothing of the loser's
