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

from sqlalchemy import event, func, insert, select
from sqlalchemy.orm import Session, SessionTransaction, SessionTransactionOrigin

from cloudseed.db.in_lists import padded
from cloudseed.servers.live_keys import sets as key_sets
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


@dataclass(frozen=True)
class Change:
    """One change of one instance's history, before it has a version."""

    instance_uuid: str
    field: str
    action: str
    actor: Actor
    old: str | None
    new: str | None


def key_changes(
    *,
    instance_uuid: str,
    action: str,
    actor: Actor,
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
) -> list[Change]:
    """A change of the server's key set: ``keys`` (2.106, every key) and ``key_pair``, which
    keeps meaning Nova's one key pair (the first key) as before 2.106."""
    return [
        Change(instance_uuid, field, action, actor, describe(old), describe(new))
        for field, describe in (("key_pair", describe_key), ("keys", describe_keys))
    ]


def record_keys(
    session: Session,
    *,
    instance_uuid: str,
    action: str,
    actor: Actor,
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
) -> None:
    """Add a change of the server's key set (``key_changes``)."""
    for change in key_changes(
        instance_uuid=instance_uuid, action=action, actor=actor, old=old, new=new
    ):
        _add(session, change)


def describe_user_data(user_data: str | None) -> str | None:
    if user_data is None:
        return None
    try:
        raw = base64.b64decode(user_data)
    except (binascii.Error, ValueError):
        raw = user_data.encode()
    return json.dumps({"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}, sort_keys=True)


# The last version of each instance's history this transaction knows of, so that many
# changes in one transaction (a project's keys fanned out to its servers) need no query, and
# no flush, per row. Dropped when the transaction ends: another may have added rows since.
_VERSIONS = "cloudseed.history_versions"


def _versions(session: Session) -> dict[str, int]:
    """This transaction's known versions, forgotten when it ends: by a listener on this
    Session alone (not on the Session class, which every session of the process would call)."""
    versions: dict[str, int] | None = session.info.get(_VERSIONS)
    if versions is None:
        versions = session.info[_VERSIONS] = {}
        if not event.contains(session, "after_transaction_end", _forget_versions):
            event.listen(session, "after_transaction_end", _forget_versions)
    return versions


def prefetch_versions(session: Session, instance_uuids: list[str]) -> None:
    """Read the last history version of each of ``instance_uuids`` in one query (their rows
    must be locked, or the transaction the only writer, as for any ``record``)."""
    versions = _versions(session)
    found = {
        uuid: version
        for uuid, version in session.execute(
            select(BootstrapChange.instance_uuid, func.max(BootstrapChange.version))
            .where(BootstrapChange.instance_uuid.in_(padded(instance_uuids)))
            .group_by(BootstrapChange.instance_uuid)
        )
    }
    for uuid in instance_uuids:
        versions[uuid] = found.get(uuid) or 0


def new_instances(session: Session, instance_uuids: list[str]) -> None:
    """Instances added in this transaction have no history yet: their versions start at 0
    without the query ``prefetch_versions`` makes (one per server of a multi-create)."""
    versions = _versions(session)
    for uuid in instance_uuids:
        versions.setdefault(uuid, 0)


def _forget_versions(session: Session, transaction: SessionTransaction) -> None:
    # Savepoints too: one rolled back may have taken versions it never wrote. Not the
    # subtransaction each flush runs in: forgetting there cost a query per row again.
    if transaction.origin is not SessionTransactionOrigin.SUBTRANSACTION:
        session.info.pop(_VERSIONS, None)


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
    _add(session, Change(instance_uuid, field, action, actor, old, new))


def record_now(session: Session, changes: list[Change]) -> None:
    """Insert the changes that change something in one statement now, where ``record`` leaves
    each to the ORM's flush: on SQLite the ORM inserts a row whose id it must read back one
    statement at a time (a create's three entries were three statements). The statement
    goes past the ORM, which flushes nothing first: the instances must be written already."""
    rows = [_row(session, change) for change in changes if change.old != change.new]
    if rows:
        session.connection().execute(insert(BootstrapChange), rows)


def _add(session: Session, change: Change) -> None:
    if change.old != change.new:
        session.add(BootstrapChange(**_row(session, change)))


def _row(session: Session, change: Change) -> dict[str, Any]:
    """The change's row, with the instance's next version."""
    versions = _versions(session)
    uuid = change.instance_uuid
    if uuid not in versions:
        prefetch_versions(session, [uuid])
    version = versions[uuid] = versions[uuid] + 1
    return {
        "instance_uuid": uuid,
        "version": version,
        "field": change.field,
        "action": change.action,
        "request_id": change.actor.request_id,
        "user_id": change.actor.user_id,
        "project_id": change.actor.project_id,
        "old_value": change.old,
        "new_value": change.new,
    }


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
