"""Live keys (2.106) in the databases: key pairs looked up in the API database, and a server's
key set changed in its cell database with everything a change brings.

A change of the set (``change``: PUT key_names or block_project_keys, the project's keys fanned
out; ``rebuilt``: a rebuild that succeeded) writes, in the caller's transaction:

- the new list (``key_sets``' stored form) and Nova's ``key_name``/``key_data`` (its first key);
- ``keys_generation`` + 1, so the delivery state (``key_delivery``) says ``pending`` until the
  guest is known to hold the new set; a rebuild also sets ``keys_boot_generation``, since its
  new disk reads the set from the metadata service at first boot;
- the bootstrap history (fields ``key_pair`` and ``keys``);
- ``guest_changed``, so every metadata worker drops what it rendered from the old set;
- for a server with a host, a queued operation ``keys`` (payload: the generation) for the
  compute agent to push through the guest agent. A rebuild queues none: its guest boots with
  the new set.

A request that changes nothing (the same keys, order, expiry and source) writes nothing.
These are service functions: they take Sessions and never commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.keypairs.models import KeyPair, ProjectKey
from cloudseed.servers import records
from cloudseed.servers.errors import InstanceInvalidState, InvalidKeyName
from cloudseed.servers.history import bootstrap as history
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys.delivery import SOURCE_PROJECT, SOURCE_SERVER, entry_defaults
from cloudseed.servers.live_keys.sets import KeyRequest

# The operation the compute agent runs for a key change (agent/key_operations.py).
OPERATION = "keys"

# The project's keys as server entries, read when called (``project_reader``).
ProjectKeys = Callable[[], list[dict[str, Any]]]


def own_entries(
    session: Session, *, user_id: str, requests: tuple[KeyRequest, ...], generation: int = 1
) -> list[dict[str, Any]]:
    """The entries for ``requests`` naming ``user_id``'s key pairs (API database), in their
    order; a name the user has no key pair of is Nova's 400 "Invalid key_name provided."."""
    if not requests:
        return []
    names = [r.name for r in requests]
    found = {
        k.name: k
        for k in session.scalars(
            select(KeyPair).where(KeyPair.user_id == user_id, KeyPair.name.in_(padded(names)))
        )
    }
    if any(name not in found for name in names):
        raise InvalidKeyName()
    return [
        key_sets.entry(
            found[r.name], source=SOURCE_SERVER, expires_at=r.expires_at, generation=generation
        )
        for r in requests
    ]


def project_entries(
    session: Session, project_id: str, *, generation: int = 1
) -> list[dict[str, Any]]:
    """The project's keys as server entries (API database), in the project's order. A key pair
    its owner deleted since it was attached is left out."""
    rows = session.execute(
        select(ProjectKey, KeyPair)
        .join(
            KeyPair,
            and_(KeyPair.user_id == ProjectKey.user_id, KeyPair.name == ProjectKey.key_name),
        )
        .where(ProjectKey.project_id == project_id)
        .order_by(ProjectKey.position, ProjectKey.id)
    )
    return [
        key_sets.entry(
            keypair,
            source=SOURCE_PROJECT,
            expires_at=key_sets.format_time(pk.expires_at) if pk.expires_at else None,
            generation=generation,
        )
        for pk, keypair in rows
    ]


def project_reader(api_db: Database, project_id: str) -> ProjectKeys:
    """Reads the project's keys (``project_entries``) in a transaction of its own."""

    def read() -> list[dict[str, Any]]:
        with api_db.read() as session:
            return project_entries(session, project_id)

    return read


def change(
    session: Session,
    uuid: str,
    *,
    actor: Actor,
    action: str,
    project: ProjectKeys,
    own: list[dict[str, Any]] | None = None,
    block_project_keys: bool | None = None,
    refuse_busy: bool = True,
) -> bool:
    """Change a server's own keys (``own``; None keeps them) and/or whether it takes its
    project's keys (``block_project_keys``). True when the set changed. ``project`` gives the
    project's keys; it is called with the instance's row locked, so a change of the project's
    list committed meanwhile is either read here or fanned out to this server after this
    transaction, never undone by a list read earlier (the stored set cannot tell: a project
    key that is also one of the server's own is stored once). ``refuse_busy``: a server in a
    task (building, rebuilding, rebooting ...) is a 409, as a user data update is; the
    project's fan-out passes False, since a project's keys reach every server whatever it is
    doing."""
    record = records.load(session, uuid, for_update=True)
    instance, extra = record.instance, record.extra
    if refuse_busy and instance.task_state is not None:
        raise InstanceInvalidState(
            uuid=uuid, operation="update_keys", attr="task_state", state=instance.task_state
        )
    if block_project_keys is not None:
        extra.block_project_keys = block_project_keys
    project_part = [] if extra.block_project_keys else project()
    changed = _change(session, record, own, project_part, actor=actor, action=action)
    if changed:
        records.guest_changed(session, uuid)
    session.flush()
    return changed


def project_changed(
    session: Session,
    server_records: list[records.ServerRecord],
    project_part: list[dict[str, Any]],
    *,
    actor: Actor,
) -> int:
    """The project's keys (``project_part``, read with every one of the records' rows locked)
    given to servers that take them: ``change`` for many servers, with one query per kind of
    row rather than per server. How many changed."""
    history.prefetch_versions(session, [r.instance.uuid for r in server_records])
    changed = [
        r.instance.uuid
        for r in server_records
        if _change(session, r, None, project_part, actor=actor, action="project_keys")
    ]
    records.guests_changed(session, changed)
    session.flush()
    return len(changed)


def _change(
    session: Session,
    record: records.ServerRecord,
    own: list[dict[str, Any]] | None,
    project_part: list[dict[str, Any]],
    *,
    actor: Actor,
    action: str,
) -> bool:
    """The new set written with its history and ``keys`` operation, unless it is the old one;
    the caller records the guest's change (one UPDATE for many) and flushes."""
    instance, extra = record.instance, record.extra
    old = [entry_defaults(e) for e in record.keypairs]
    new = key_sets.merge(key_sets.own(old) if own is None else own, project_part)
    if key_sets.same(old, new):
        return False
    generation = (extra.keys_generation or 1) + 1
    _write(record, key_sets.with_generations(old, new, generation), generation)
    history.record_keys(
        session, instance_uuid=instance.uuid, action=action, actor=actor, old=old, new=new
    )
    if instance.host is not None:
        queue.enqueue(
            session,
            instance_uuid=instance.uuid,
            kind=OPERATION,
            host=instance.host,
            payload={"generation": generation},
        )
    return True


def rebuilt(
    session: Session,
    before: records.ServerRecord,
    own: list[dict[str, Any]] | None,
    *,
    actor: Actor | None,
    project: ProjectKeys,
) -> dict[str, Any]:
    """A rebuild succeeded (``before``: the record, its row locked): its own keys (``own``;
    None keeps the server's) and the project's (``project``, read now, as in ``change``), as
    a new generation that is also the boot generation (the new disk holds nothing of the old
    set, so every key is new at it). Returns the instance columns ``key_name`` and
    ``key_data`` for the caller's UPDATE."""
    extra = before.extra
    old = [entry_defaults(e) for e in before.keypairs]
    project_part = [] if extra.block_project_keys else project()
    new = key_sets.merge(key_sets.own(old) if own is None else key_sets.own(own), project_part)
    generation = (extra.keys_generation or 1) + 1
    entries = [{**e, "since_generation": generation} for e in new]
    _write(before, entries, generation)
    extra.keys_boot_generation = generation
    session.flush()
    if actor is not None:
        history.record_keys(
            session,
            instance_uuid=before.instance.uuid,
            action="rebuild",
            actor=actor,
            old=old,
            new=new,
        )
    key_name, key_data = key_sets.first_key(entries)
    return {"key_name": key_name, "key_data": key_data}


def _write(record: records.ServerRecord, entries: list[dict[str, Any]], generation: int) -> None:
    """The new list and generation, and Nova's columns (the first key); flushed by the
    caller."""
    record.extra.keypairs = json.dumps(entries, sort_keys=True)
    record.extra.keys_generation = generation
    record.instance.key_name, record.instance.key_data = key_sets.first_key(entries)


__all__ = [
    "OPERATION",
    "ProjectKeys",
    "change",
    "own_entries",
    "project_entries",
    "project_reader",
    "rebuilt",
]
