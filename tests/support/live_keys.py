"""Live keys (2.106) in their stored form: key entries, expiry times, writing a key set as
the API does, and the delivery state the metadata service records."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.servers import records
from cloudseed.servers.models import InstanceExtra
from tests.support import keys

PROJECT_KEY = keys.ed25519_public("project")


def entry(name: str, public_key: str, **fields: Any) -> dict[str, Any]:
    """A stored key entry (spec17: the stored form of instance_extra.keypairs)."""
    return {
        "name": name,
        "user_id": "alice",
        "fingerprint": "00:11",
        "fingerprint_sha256": "SHA256:x",
        "public_key": public_key,
        "type": "ssh",
        "created_at": "2030-01-01T00:00:00",
        "expires_at": None,
        "source": "server",
        "since_generation": 1,
        **fields,
    }


def at(seconds: float) -> str:
    """An expires_at ``seconds`` from now, as the API stores it."""
    return (utcnow() + dt.timedelta(seconds=seconds)).isoformat() + "Z"


def set_keys(
    cell: Database,
    uuid: str,
    entries: list[dict[str, Any]] | None = None,
    *,
    announce: bool = True,
    **columns: Any,
) -> None:
    """Write the key set and keys_* columns as the API does (a guest change, unless
    ``announce`` is False: then cached guests keep what they had)."""

    def work(session: Session) -> None:
        if entries is not None:
            records.set_extra(session, uuid, keypairs=entries)
        if columns:
            session.execute(
                update(InstanceExtra).where(InstanceExtra.instance_uuid == uuid).values(**columns)
            )
        if announce:
            records.guest_changed(session, uuid)

    cell.run(work, write=True)


def delivery(cell: Database, uuid: str) -> tuple[int, str | None]:
    with cell.read() as session:
        row = session.execute(
            select(InstanceExtra.keys_applied_generation, InstanceExtra.keys_applied_via).where(
                InstanceExtra.instance_uuid == uuid
            )
        ).one()
    return row[0], row[1]
