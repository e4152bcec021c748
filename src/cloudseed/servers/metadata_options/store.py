"""Per-server metadata options (2.109) in the databases: a server's own (its system metadata,
cell database), a project's defaults for new servers (API database), and the token-less access
audit's counts (cell databases). Service functions: they take Sessions and never commit.

A change of a server's options is a change its guest sees: ``guest_changed`` in the same
transaction, so every metadata worker drops its copy and answers the next request with the new
options (live keys and rebuilds do the same).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import (
    DateTime,
    Dialect,
    Table,
    TypeDecorator,
    bindparam,
    case,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.db.in_lists import padded
from cloudseed.servers import records
from cloudseed.servers.metadata_options.models import MetadataAccess, ProjectMetadataOptions
from cloudseed.servers.metadata_options.options import (
    SYSTEM_METADATA_KEY,
    UNSET,
    MetadataOptions,
    from_stored,
    of_system_metadata,
)


def of_record(record: records.ServerRecord) -> MetadataOptions:
    """What ``record``'s server has set (UNSET: nothing)."""
    return of_system_metadata(record.system_metadata)


def change(session: Session, uuid: str, body: Mapping[str, object]) -> bool:
    """Apply a PUT's ``metadata_options`` to server ``uuid`` (its row locked first, so two
    PUTs merge, never lose a field); whether anything changed. Nothing changed writes nothing."""
    record = records.load(session, uuid, for_update=True)
    before = of_record(record)
    after = before.changed_by(body)
    if after == before:
        return False
    records.set_system_metadata(session, uuid, SYSTEM_METADATA_KEY, after.stored())
    records.guest_changed(session, uuid)
    return True


# -- project defaults (API database) ------------------------------------------------------------


def project_defaults(session: Session, project_id: str) -> MetadataOptions:
    row = session.get(ProjectMetadataOptions, project_id)
    return (from_stored(row.options) if row is not None else None) or UNSET


def set_project_defaults(session: Session, project_id: str, options: MetadataOptions) -> None:
    """Replace the project's defaults (UNSET: none)."""
    row = session.get(ProjectMetadataOptions, project_id)
    stored = options.stored()
    if stored is None:
        if row is not None:
            session.delete(row)
        return
    if row is None:
        session.add(ProjectMetadataOptions(project_id=project_id, options=stored))
    else:
        row.options, row.updated_at = stored, utcnow()


def for_new_server(session: Session, project_id: str, requested: MetadataOptions) -> str | None:
    """The stored options of a new server of ``project_id``: the request's, with the project's
    defaults where it leaves a field unset (None: nothing set)."""
    return requested.over(project_defaults(session, project_id)).stored()


# -- the token-less access audit (cell databases) -------------------------------------------------


@dataclass(slots=True)
class Counts:
    """One server's counts since the last flush (or in all, as read back)."""

    project_id: str
    tokenless: int = 0
    tokenless_at: dt.datetime | None = None
    user_data: int = 0
    user_data_at: dt.datetime | None = None
    password: int = 0
    password_at: dt.datetime | None = None


_ACCESS = cast(Table, MetadataAccess.__table__)
_COUNTED = ("tokenless", "user_data", "password")


class _StoredTime(TypeDecorator[dt.datetime]):
    """A time bound as given: already turned into what the database stores (``_storing``).
    The expression below names each time three times, and SQLite's DATETIME turns a datetime
    into text at every mention of every row: three quarters of a flush's CPU, 10,000 servers
    taking 0.4-0.6 s of a worker's GIL every interval."""

    impl = DateTime
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None


def _storing(dialect: Dialect) -> Callable[[dt.datetime | None], Any]:
    """How ``dialect`` turns a time into what it stores (SQLite: text; the others: as is)."""
    processor = DateTime().dialect_impl(dialect).bind_processor(dialect)
    return processor if processor is not None else _as_is


def _as_is(value: dt.datetime | None) -> dt.datetime | None:
    return value


def _later(name: str) -> Any:
    """The stored time of ``name`` or the parameter's, whichever is later (a NULL parameter
    keeps the stored time; a NULL stored time takes the parameter), portably."""
    column = _ACCESS.c[f"{name}_last_at"]
    at = bindparam(f"{name}_at", type_=_StoredTime())
    return case((column.is_(None), at), (column < at, at), else_=column)


# Built once, run with one parameter set per server (executemany): a flush of a boot storm's
# thousands of servers is a few statements, not thousands compiled and sent one by one.
_ADD_COUNTS = (
    update(_ACCESS)
    .where(_ACCESS.c.instance_uuid == bindparam("uuid"))
    .values(
        {
            **{
                f"{name}_count": _ACCESS.c[f"{name}_count"] + bindparam(f"{name}_added")
                for name in _COUNTED
            },
            **{f"{name}_last_at": _later(name) for name in _COUNTED},
        }
    )
)
_NEW_COUNTS = insert(_ACCESS)
_KNOWN = select(_ACCESS.c.instance_uuid).where(
    _ACCESS.c.instance_uuid.in_(bindparam("uuids", expanding=True))
)
_CHUNK = 500  # servers per IN list


def add_counts(session: Session, counts: Mapping[str, Counts]) -> None:
    """Add ``counts`` (instance uuid -> what a worker counted) to the stored ones: the
    servers that have a row get one UPDATE each, the others a row, both as one executemany.
    Two workers inserting the same server's first row at once: the loser's IntegrityError
    rolls its transaction back and the caller runs it again (``Database.run``'s ``lost_to``),
    when the UPDATE finds the row."""
    uuids = sorted(counts)  # one lock order for every worker
    connection = session.connection()
    known: set[str] = set()
    for i in range(0, len(uuids), _CHUNK):
        known.update(connection.execute(_KNOWN, {"uuids": padded(uuids[i : i + _CHUNK])}).scalars())
    stored = _storing(connection.dialect)
    updates = [
        {
            "uuid": uuid,
            **{f"{name}_added": getattr(counts[uuid], name) for name in _COUNTED},
            **{f"{name}_at": stored(getattr(counts[uuid], f"{name}_at")) for name in _COUNTED},
        }
        for uuid in uuids
        if uuid in known
    ]
    rows = [
        {
            "instance_uuid": uuid,
            "project_id": counts[uuid].project_id,
            **{f"{name}_count": getattr(counts[uuid], name) for name in _COUNTED},
            **{f"{name}_last_at": getattr(counts[uuid], f"{name}_at") for name in _COUNTED},
        }
        for uuid in uuids
        if uuid not in known
    ]
    if updates:
        connection.execute(_ADD_COUNTS, updates)
    if rows:
        connection.execute(_NEW_COUNTS, rows)


def access_of(session: Session, uuid: str) -> Counts | None:
    row = session.scalar(select(MetadataAccess).where(MetadataAccess.instance_uuid == uuid))
    if row is None:
        return None
    return Counts(
        project_id=row.project_id,
        tokenless=row.tokenless_count,
        tokenless_at=row.tokenless_last_at,
        user_data=row.user_data_count,
        user_data_at=row.user_data_last_at,
        password=row.password_count,
        password_at=row.password_last_at,
    )
