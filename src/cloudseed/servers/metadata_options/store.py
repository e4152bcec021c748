"""Per-server metadata options (2.109) in the databases: a server's own (its system metadata,
cell database), a project's defaults for new servers (API database), and the token-less access
audit's counts (cell databases). Service functions: they take Sessions and never commit.

A change of a server's options is a change its guest sees: ``guest_changed`` in the same
transaction, so every metadata worker drops its copy and answers the next request with the new
options (live keys and rebuilds do the same).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
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


def add_counts(session: Session, counts: Mapping[str, Counts]) -> None:
    """Add ``counts`` (instance uuid -> what a worker counted) to the stored ones: one UPDATE
    per server, an INSERT where it has no row yet. Two workers inserting the same server's
    first row at once: the loser's IntegrityError rolls its transaction back and the caller
    runs it again (``Database.run``'s ``lost_to``), when the UPDATE finds the row."""
    for uuid in sorted(counts):  # one lock order for every worker
        c = counts[uuid]
        values: dict[str, object] = {
            "tokenless_count": MetadataAccess.tokenless_count + c.tokenless,
            "user_data_count": MetadataAccess.user_data_count + c.user_data,
            "password_count": MetadataAccess.password_count + c.password,
        }
        # Times only move forward: each worker's batch carries its own latest.
        for name, at in (
            ("tokenless_last_at", c.tokenless_at),
            ("user_data_last_at", c.user_data_at),
            ("password_last_at", c.password_at),
        ):
            if at is not None:
                column = getattr(MetadataAccess, name)
                values[name] = _max(column, at)
        done = session.execute(
            update(MetadataAccess)
            .where(MetadataAccess.instance_uuid == uuid)
            .values(values)
            .execution_options(synchronize_session=False)
        )
        if done.rowcount == 0:  # type: ignore[attr-defined]
            session.add(
                MetadataAccess(
                    instance_uuid=uuid,
                    project_id=c.project_id,
                    tokenless_count=c.tokenless,
                    tokenless_last_at=c.tokenless_at,
                    user_data_count=c.user_data,
                    user_data_last_at=c.user_data_at,
                    password_count=c.password,
                    password_last_at=c.password_at,
                )
            )
            session.flush()


def _max(column: Any, at: dt.datetime) -> Any:
    """``column`` or ``at``, whichever is later (NULL counts as earlier), portably."""
    return case((column.is_(None), at), (column < at, at), else_=column)


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
