"""The versioned history of each instance's key pair, keys and user data.

Operators ask which user data an instance actually booted with; no other implementation keeps
this. Each change is one row: who, when, which request, and the old and new value. Key pairs are
recorded by name and fingerprint (field ``key_pair``: the first key, Nova's one key pair; field
``keys``: the whole set of 2.106, each key with its SHA-256 fingerprint, expiry and source);
user data by size and SHA-256 only, because it may hold secrets.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cloudseed.servers import key_sets
from cloudseed.servers.models import BootstrapChange


@dataclass(frozen=True)
class Actor:
    """Who asked, and in which request."""

    user_id: str
    project_id: str
    request_id: str


def describe_key(keypairs: list[dict[str, Any]]) -> str | None:
    if not keypairs:
        return None
    first = keypairs[0]
    return json.dumps(
        {
            "name": first["name"],
            "fingerprint": first["fingerprint"],
            "type": first.get("type", "ssh"),
        },
        sort_keys=True,
    )


def describe_keys(keypairs: list[dict[str, Any]]) -> str | None:
    if not keypairs:
        return None
    return json.dumps(key_sets.describe(keypairs), sort_keys=True)


def record_keys(
    session: Session,
    *,
    instance_uuid: str,
    action: str,
    actor: Actor,
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
) -> None:
    """A change of the server's key set: ``keys`` (2.106, every key) and ``key_pair``, which
    keeps meaning Nova's one key pair (the first key) as before 2.106."""
    for field, describe in (("key_pair", describe_key), ("keys", describe_keys)):
        record(
            session,
            instance_uuid=instance_uuid,
            field=field,
            action=action,
            actor=actor,
            old=describe(old),
            new=describe(new),
        )


def describe_user_data(user_data: str | None) -> str | None:
    if user_data is None:
        return None
    try:
        raw = base64.b64decode(user_data)
    except (binascii.Error, ValueError):
        raw = user_data.encode()
    return json.dumps({"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}, sort_keys=True)


def record(
    session: Session,
    *,
    instance_uuid: str,
    field: str,
    action: str,
    actor: Actor,
    old: str | None,
    new: str | None,
) -> None:
    """Add a change, unless nothing changed."""
    if old == new:
        return
    version = (
        session.scalar(
            select(func.max(BootstrapChange.version)).where(
                BootstrapChange.instance_uuid == instance_uuid
            )
        )
        or 0
    ) + 1
    session.add(
        BootstrapChange(
            instance_uuid=instance_uuid,
            version=version,
            field=field,
            action=action,
            request_id=actor.request_id,
            user_id=actor.user_id,
            project_id=actor.project_id,
            old_value=old,
            new_value=new,
        )
    )
    session.flush()


def history(session: Session, instance_uuid: str) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(BootstrapChange)
        .where(BootstrapChange.instance_uuid == instance_uuid)
        .order_by(BootstrapChange.version)
    )
    return [
        {
            "version": row.version,
            "field": row.field,
            "action": row.action,
            "request_id": row.request_id,
            "user_id": row.user_id,
            "project_id": row.project_id,
            "changed_at": row.changed_at.isoformat(),
            "old": json.loads(row.old_value) if row.old_value else None,
            "new": json.loads(row.new_value) if row.new_value else None,
        }
        for row in rows
    ]
