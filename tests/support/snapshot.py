"""Every row of every table of a database, to check that a rejected request changed nothing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, select

from cloudseed.db.engines import Database

Snapshot = dict[str, list[tuple[Any, ...]]]


def snapshot(*dbs: Database) -> Snapshot:
    """The rows of every table (reflected, so tables no model declares count too) of ``dbs``,
    each table's rows sorted, keyed by ``<database>.<table>``."""
    result: Snapshot = {}
    for db in dbs:
        metadata = MetaData()
        metadata.reflect(bind=db.engine)
        with db.engine.connect() as connection:
            for name, table in sorted(metadata.tables.items()):
                rows = connection.execute(select(table)).all()
                result[f"{db.name}.{name}"] = sorted((tuple(row) for row in rows), key=repr)
    return result


def changes(before: Snapshot, after: Snapshot) -> dict[str, tuple[int, int]]:
    """The tables whose rows differ: name -> (rows before, rows after)."""
    return {
        name: (len(before.get(name, [])), len(after.get(name, [])))
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }
