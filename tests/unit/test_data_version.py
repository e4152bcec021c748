"""db/data_version.py against real SQLite files: a commit by any other connection is seen
once, a rollback and a read are not, and other databases get no probe."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import create_engine

from cloudseed.db.data_version import DataVersion


def test_another_connections_commit_is_seen_once(tmp_path: Path) -> None:
    path = tmp_path / "cell.sqlite"
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.commit()
    probe = DataVersion(str(path))
    assert not probe.changed()
    writer.execute("INSERT INTO t VALUES (1)")
    assert not probe.changed()  # not committed yet
    writer.commit()
    assert probe.changed()
    assert not probe.changed()
    writer.execute("INSERT INTO t VALUES (2)")
    writer.rollback()
    writer.execute("SELECT * FROM t").fetchall()
    assert not probe.changed()
    probe.close()


def test_probes_only_for_sqlite_files(tmp_path: Path) -> None:
    path = tmp_path / "api.sqlite"
    probe = DataVersion.of(create_engine(f"sqlite:///{path}"))
    assert probe is not None
    probe.close()
    assert DataVersion.of(create_engine("sqlite://")) is None
    assert DataVersion.of(create_engine("postgresql+psycopg://u@127.0.0.1/db")) is None
