"""Every row of every table of a database, to check that a rejected request changed nothing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, inspect, select

from cloudseed.db.engines import Database

Snapshot = dict[str, list[tuple[Any, ...]]]

# Written in the background whatever a request does: the compute agents' heartbeats and the
# console mirror's copies of their guests' consoles, and the metadata service's token-less
# access audit, flushed every few seconds from its workers' counts of guests' reads. Not the
# request's changes.
HEARTBEAT_TABLES = frozenset({"services", "compute_nodes", "console_tails", "metadata_access"})


# Reflected tables by database URL and table names: reflecting every table took most of a
# snapshot's time (0.2 s of each on SQLite, three snapshots per fuzzed request).
_REFLECTED: dict[tuple[str, tuple[str, ...]], MetaData] = {}


def _reflected(db: Database) -> MetaData:
    """``db``'s tables, reflected again only when their names change (a migration)."""
    key = (str(db.engine.url), tuple(sorted(inspect(db.engine).get_table_names())))
    metadata = _REFLECTED.get(key)
    if metadata is None:
        metadata = _REFLECTED[key] = MetaData()
        metadata.reflect(bind=db.engine)
    return metadata


def snapshot(*dbs: Database) -> Snapshot:
    """The rows of every table (reflected, so tables no model declares count too) of ``dbs``
    but the heartbeat tables, each table's rows sorted, keyed by ``<database>.<table>``."""
    result: Snapshot = {}
    for db in dbs:
        metadata = _reflected(db)
        with db.engine.connect() as connection:
            for name, table in sorted(metadata.tables.items()):
                if name in HEARTBEAT_TABLES:
                    continue
                rows = connection.execute(select(table)).all()
                result[f"{db.name}.{name}"] = sorted((tuple(row) for row in rows), key=repr)
    return result


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, one line per table (rows gone, rows new); empty when nothing changed."""
    out = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        if old != new:
            gone = [r for r in old if r not in new]
            added = [r for r in new if r not in old]
            out.append(f"{table}: -{gone!r:.300} +{added!r:.300}")
    return out
