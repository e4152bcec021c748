"""``Database.run``: a caller's own "a concurrent transaction won" errors (``lost_to``) run the
transaction again and the last one is raised as it is; what a transaction announces is heard
once, after it commits, never when it rolls back, and only by the listeners of its database's
announcer (its own unless shared). On a SQLite file; the
deadlocks of PostgreSQL and MariaDB are tests/functional/test_write_retries.py's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from cloudseed.db.announcements import Announcer, announce
from cloudseed.db.engines import Database
from cloudseed.errors import Conflict, WriteContended


class Lost(Conflict):
    pass


@pytest.fixture()
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.connect("test", f"sqlite:///{tmp_path / 'db.sqlite'}")
    yield database
    database.dispose()


def losing(times: int) -> tuple[list[int], Callable[[Session], str]]:
    runs: list[int] = []

    def transaction(_session: Session) -> str:
        runs.append(len(runs) + 1)
        if len(runs) <= times:
            raise Lost("a concurrent transaction took it first")
        return "done"

    return runs, transaction


def test_run_again_until_it_wins(db: Database) -> None:
    runs, transaction = losing(2)
    assert db.run(transaction, write=True, attempts=3, lost_to=(Lost,)) == "done"
    assert runs == [1, 2, 3]


def test_the_last_loss_is_raised_as_it_is(db: Database) -> None:
    runs, transaction = losing(5)
    with pytest.raises(Lost, match="took it first"):
        db.run(transaction, write=True, attempts=3, lost_to=(Lost,))
    assert runs == [1, 2, 3]


def test_other_errors_are_not_run_again(db: Database) -> None:
    runs, transaction = losing(1)
    with pytest.raises(Lost):
        db.run(transaction, write=True, attempts=3)
    assert runs == [1]


class Deadlock(Exception):
    """What MySQL's driver raises for a deadlock: the error code first."""

    def __init__(self) -> None:
        super().__init__(1213, "Deadlock found when trying to get lock")


def rolled_back() -> OperationalError:
    return OperationalError("UPDATE ...", {}, Deadlock())


def heard_by(db: Database, topic: str = "topic") -> list[frozenset[str]]:
    heard: list[frozenset[str]] = []
    db.announcer.subscribe(topic, heard.append)
    return heard


def test_a_rolled_back_transaction_runs_again_then_is_contended(db: Database) -> None:
    runs: list[int] = []

    def transaction(_session: Session) -> None:
        runs.append(1)
        raise rolled_back()

    with pytest.raises(WriteContended):
        db.run(transaction, write=True, attempts=4)
    assert len(runs) == 4


def test_announced_after_commit_once_with_every_item(db: Database) -> None:
    heard = heard_by(db)

    def transaction(session: Session) -> None:
        assert announce(session, "topic", ["a"]) is True  # the first in this transaction
        assert announce(session, "topic", ["b", "a"]) is False
        assert heard == []  # not before the commit

    db.run(transaction, write=True)
    assert heard == [frozenset({"a", "b"})]


def test_a_rolled_back_transaction_announces_nothing(db: Database) -> None:
    heard = heard_by(db)

    def transaction(session: Session) -> None:
        announce(session, "topic", ["a"])
        raise Lost("no")

    with pytest.raises(Lost):
        db.run(transaction, write=True)
    assert heard == []


def test_a_transaction_run_again_announces_once(db: Database) -> None:
    heard = heard_by(db)
    runs: list[int] = []

    def transaction(session: Session) -> None:
        runs.append(1)
        announce(session, "topic", [f"run {len(runs)}"])
        if len(runs) == 1:
            raise rolled_back()

    db.run(transaction, write=True)
    assert heard == [frozenset({"run 2"})]  # nothing of the attempt that was rolled back


def test_core_transactions_announce_too(db: Database) -> None:
    heard = heard_by(db)
    db.run(lambda connection: announce(connection, "topic", ["c"]), write=True, core=True)
    assert heard == [frozenset({"c"})]


def test_announcing_outside_the_runner_is_a_mistake(db: Database) -> None:
    with db.read() as session, pytest.raises(RuntimeError, match="outside"):
        announce(session, "topic", ["a"])


def test_an_unsubscribed_listener_hears_nothing_more(db: Database) -> None:
    heard: list[frozenset[str]] = []
    stop = db.announcer.subscribe("topic", heard.append)
    stop()
    db.run(lambda session: announce(session, "topic", ["a"]), write=True)
    assert heard == []


def test_databases_hear_each_other_only_through_a_shared_announcer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    first, second = Database.connect("first", url), Database.connect("second", url)
    shared = Announcer()
    api, cell = (
        Database.connect("api", url, announcer=shared),
        Database.connect("cell", url, announcer=shared),
    )
    try:
        assert first.announcer is not second.announcer
        heard_first, heard_second, heard_api = heard_by(first), heard_by(second), heard_by(api)
        first.run(lambda session: announce(session, "topic", ["a"]), write=True)
        cell.run(lambda session: announce(session, "topic", ["b"]), write=True)
        assert heard_first == [frozenset({"a"})]
        assert heard_second == []
        assert heard_api == [frozenset({"b"})]
    finally:
        for db in (first, second, api, cell):
            db.dispose()
