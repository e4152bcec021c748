"""Every row of every table, to assert that a rejected request changed nothing.

``snapshot(api_db, cell_db)`` reads each table of the API and cell schemas (from the models'
metadata, so a new table is covered without a change here) in one read transaction per
database; two snapshots compare equal when no row was added, removed or changed. ``changes``
names what differs, for the assertion message.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, select

from cloudseed.db.base import ApiBase, CellBase
from cloudseed.db.engines import Database

Snapshot = dict[str, list[tuple[Any, ...]]]


def _rows(db: Database, metadata: MetaData, prefix: str) -> Snapshot:
    out: Snapshot = {}
    with db.read() as session:
        for table in metadata.sorted_tables:
            rows = [tuple(row) for row in session.execute(select(table))]
            out[f"{prefix}.{table.name}"] = sorted(rows, key=repr)
    return out


def snapshot(api_db: Database, cell_db: Database | None = None) -> Snapshot:
    """The API database's tables, and the cell database's when given."""
    out = _rows(api_db, ApiBase.metadata, "api")
    if cell_db is not None:
        out.update(_rows(cell_db, CellBase.metadata, "cell"))
    return out


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, one line per table: rows gone and rows new."""
    out = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        if old != new:
            gone = [r for r in old if r not in new]
            added = [r for r in new if r not in old]
            out.append(f"{table}: -{gone!r:.300} +{added!r:.300}")
    return out
