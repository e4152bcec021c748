"""SQLite's WAL checkpoints in their own thread (db/checkpoints.py), on real database files:
what a pass copies, that it leaves no reader behind on the pooled connection, that commits
checkpoint only past the backstop, and what the thread does with databases it was told of."""

from __future__ import annotations

import gc
import sqlite3
import time
import weakref
from pathlib import Path

import pytest
from sqlalchemy import text

from cloudseed.db import checkpoints
from cloudseed.db.engines import Database

ROW = "x" * 3000  # about one 4 KiB page a row


@pytest.fixture
def db(tmp_path: Path):
    database = Database.connect("cell1", f"sqlite:///{tmp_path / 'cell.sqlite'}")
    with database.engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (a TEXT)"))
    yield database
    database.dispose()


def write(db: Database, rows: int) -> None:
    with db.engine.begin() as connection:
        connection.execute(text("INSERT INTO t VALUES (:a)"), [{"a": ROW}] * rows)


def test_commits_leave_the_log_to_the_thread_up_to_the_backstop(db: Database, tmp_path: Path):
    checkpoints.forget(db.engine)  # a thread started by another test leaves it alone
    with db.engine.connect() as connection:
        pages = connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    assert pages == checkpoints.BACKSTOP_PAGES
    # 1,500 pages: past SQLite's own 1,000, so a commit would have copied them by itself.
    for _ in range(15):
        write(db, 100)
    assert (tmp_path / "cell.sqlite").stat().st_size < 100 * 4096


def test_a_pass_copies_the_log_and_keeps_no_reader(db: Database, tmp_path: Path):
    write(db, 500)
    busy, logged, copied = checkpoints.checkpoint(db.engine)
    assert busy == 0 and logged >= 500 and copied == logged
    assert (tmp_path / "cell.sqlite").stat().st_size > 500 * 3000
    # The pooled connection it used holds no snapshot: a TRUNCATE checkpoint, which needs
    # every reader gone, empties the log.
    other = sqlite3.connect(tmp_path / "cell.sqlite")
    try:
        assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall() == [(0, 0, 0)]
    finally:
        other.close()
    assert (tmp_path / "cell.sqlite-wal").stat().st_size == 0


def test_the_thread_checkpoints_what_was_registered_and_spares_what_vanished(
    db: Database, tmp_path: Path
):
    gone = Database.connect("gone", f"sqlite:///{tmp_path / 'gone' / 'gone.sqlite'}")
    with gone.engine.begin() as connection:
        connection.execute(text("CREATE TABLE g (a TEXT)"))
    gone.engine.dispose()  # without Database.dispose: still registered
    (tmp_path / "gone" / "gone.sqlite").unlink()
    (tmp_path / "gone" / "gone.sqlite-wal").unlink(missing_ok=True)
    write(db, 500)
    checkpoints.start()
    deadline = time.monotonic() + 10 * checkpoints.INTERVAL
    while (tmp_path / "cell.sqlite").stat().st_size < 500 * 3000:
        assert time.monotonic() < deadline, "no checkpoint within ten intervals"
        time.sleep(0.05)
    checkpoints.checkpoint_all()  # a pass like the thread's, over both
    assert not (tmp_path / "gone" / "gone.sqlite").exists()  # not made anew, empty
    gone.dispose()
    assert gone.engine not in checkpoints._databases


def test_an_engine_nobody_disposed_of_is_still_collected(tmp_path: Path):
    db = Database.connect("cell1", f"sqlite:///{tmp_path / 'left.sqlite'}")
    engine = weakref.ref(db.engine)
    assert engine() in checkpoints._databases
    del db
    gc.collect()
    assert engine() is None
