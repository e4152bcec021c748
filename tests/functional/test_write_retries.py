"""Writes the database rolls back to break a deadlock run again (``Database.run``): two real
transactions locking two rows in opposite orders, on PostgreSQL and MariaDB; and an ordinary
write site, which did not retry before the runner did it for every write, survives one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database, Isolation
from cloudseed.errors import WriteContended
from cloudseed.servers import records
from cloudseed.servers.lifecycle import edits
from cloudseed.servers.models import InstanceMetadata
from tests.support.instances import add_instance

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
    other's: on their first runs the database must roll one of them back. A rerun waits until
    the other writer's transaction has ended: started at once, it could take its first row
    again before the winner (still waiting for that row) got it, and cross it a second time."""

    def __init__(self) -> None:
        self.both_hold_one = threading.Barrier(2, timeout=30)
        self.runs = {1: 0, 2: 0}
        self.lock = threading.Lock()
        self.ended = {1: threading.Event(), 2: threading.Event()}

    def both(self, run: Callable[[Callable[[Any], int]], int]) -> list[Any]:
        """Writers 1 and 2 at once, each through ``run``; their outcomes."""

        def writing(first: int) -> int:
            try:
                return run(self.writer(first))
            finally:
                self.ended[first].set()

        return run_both([lambda: writing(1), lambda: writing(2)])

    def writer(self, first: int) -> Callable[[Any], int]:
        second = 3 - first

        def work(session: Session | Connection) -> int:  # the ORM's or Core's
            with self.lock:
                self.runs[first] += 1
                run = self.runs[first]
            if run > 1:
                self.ended[second].wait(30)
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
    outcomes = Crossing().both(lambda writer: db.run(writer, write=True, attempts=3))
    # One went through on its first run, the other was rolled back and ran a second time.
    assert set(outcomes) == {1, 2}
    assert counts(db) == [2, 2]  # each writer's two updates, once each


def test_serializable_core_runs_again_too(db: Database) -> None:
    outcomes = Crossing().both(
        lambda writer: db.run(writer, write=True, isolation=Isolation.SERIALIZABLE, core=True)
    )
    # At SERIALIZABLE, PostgreSQL may refuse the loser's second run too (the winner committed
    # after that run's snapshot was taken): it runs until it goes through.
    assert 1 in outcomes and max(outcomes) >= 2, outcomes
    assert counts(db) == [2, 2]


def test_out_of_attempts_is_a_409_and_leaves_nothing(db: Database) -> None:
    outcomes = Crossing().both(lambda writer: db.run(writer, write=True, attempts=1))
    refused = [o for o in outcomes if isinstance(o, WriteContended)]
    assert len(refused) == 1 and 1 in outcomes, outcomes
    assert refused[0].message == "Concurrent requests changed the same records; try again."
    assert counts(db) == [1, 1]  # the winner's two updates; nothing of the loser's


def test_an_ordinary_write_site_survives_a_deadlock(db: Database) -> None:
    """A metadata item delete (servers/api/metadata_items.py: ``in_cell(..., write=True)``,
    the runner's default attempts), which did not run again before: crossed with another
    transaction that holds the instance row and wants a row the delete's transaction took
    first. Whichever of them the database rolls back runs again, and both land."""
    uid = add_instance(db)
    db.run(
        lambda session: session.add(InstanceMetadata(instance_uuid=uid, key="k", value="v")),
        write=True,
    )
    both_hold_one = threading.Barrier(2, timeout=30)
    runs = {"delete": 0, "other": 0}
    ended = {"delete": threading.Event(), "other": threading.Event()}  # as Crossing's
    bump = text(f"UPDATE {TABLE} SET n = n + 1 WHERE id = 1")

    def delete_item(session: Session) -> bool:
        runs["delete"] += 1
        if runs["delete"] > 1:
            ended["other"].wait(30)
        session.execute(bump)  # a row the other transaction wants next
        if runs["delete"] == 1:
            both_hold_one.wait()
        return edits.delete_metadata_item(session, uid, "k")  # wants the instance row

    def other(session: Session) -> None:
        runs["other"] += 1
        if runs["other"] > 1:
            ended["delete"].wait(30)
        records.load(session, uid, for_update=True)  # the instance row
        if runs["other"] == 1:
            both_hold_one.wait()
        session.execute(bump)

    def ending(name: str, work: Callable[[Session], Any]) -> Any:
        try:
            return db.run(work, write=True)
        finally:
            ended[name].set()

    outcomes = run_both([lambda: ending("delete", delete_item), lambda: ending("other", other)])
    assert outcomes == [True, None], outcomes
    assert runs["delete"] + runs["other"] == 3, runs  # one of them was rolled back once
    assert counts(db) == [2, 0]
    with db.read() as session:
        assert edits.metadata(session, uid) == {}
