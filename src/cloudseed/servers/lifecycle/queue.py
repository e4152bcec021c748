"""Operations as records: the queue between the API and the compute agents (cell database).

A request that starts an operation calls ``enqueue`` in the same transaction as its task
claim and the values it writes, so an accepted request always has its work queued and a
failed one queues nothing. An agent takes work with ``claim``: pending operations of its host,
and running ones whose lease ran out (their agent died), each with a lease in its own name.
It renews the lease while it works (``renew``) and ends the operation with ``finish`` in the
transaction that records the outcome; ``finish`` succeeds only while the lease is still the
agent's, so an agent that lost its lease (paused, partitioned, or cancelled by an admin's
reset) can never overwrite what happened since.

On PostgreSQL and MariaDB ``claim`` reads with ``FOR UPDATE SKIP LOCKED``, so agents of one
host never wait on each other's rows; SQLite has one writer at a time, which is the same
guarantee. Its transaction runs at ``CLAIM_ISOLATION`` (READ COMMITTED), so a claim holds only
the rows it takes: at MariaDB's REPEATABLE READ, a claim that walked the primary key (its plan
for a small table) held every row it passed, and a claim of another host skipped its own
pending work as locked until a later pass. After commit, the ``OPERATIONS`` listeners of the
database's announcer hear which hosts got new work (db/announcements.py: the in-process agent
wakes at once); on PostgreSQL a NOTIFY on the ``cloudseed_operations`` channel, sent at
commit, wakes the agents of other processes (``db/notify.py``); elsewhere they find the work
at their next poll.

An operation queued with a notice (2.111, ``servers/notices/``) has a ``not_before``: ``claim``
passes it over until then, unless its guest acknowledged it (``acknowledged_at``); its event
follows it (taken, ended, cancelled) in the same transactions.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update
from sqlalchemy.orm import Session

from cloudseed.db.announcements import announce
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Isolation
from cloudseed.db.in_lists import padded
from cloudseed.db.notify import OPERATIONS, notify
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.models import Operation
from cloudseed.servers.notices import rules as notice_rules
from cloudseed.servers.notices import store as notices

PENDING, RUNNING, DONE, FAILED, CANCELLED = "pending", "running", "done", "failed", "cancelled"
OPEN = (PENDING, RUNNING)
# The isolation of a transaction that calls ``claim`` (the module's docstring says why).
CLAIM_ISOLATION = Isolation.READ_COMMITTED
# "keys": push a server's live key set through the guest agent (agent/key_operations.py); it claims
# no task, so it may run beside another operation of the same instance.
# "delete": a delete with a notice, done by the agent when the notice ends
# (agent/noticed_delete.py); a delete without one is done by the request.
KINDS = (
    "build",
    "rebuild",
    "reboot_soft",
    "reboot_hard",
    "stop",
    "start",
    "destroy",
    "keys",
    "delete",
)

# Payload keys that are secrets: removed when the operation ends, whatever the outcome.
SECRET_KEYS = ("admin_password", "files")


def enqueue(
    session: Session,
    *,
    instance_uuid: str,
    kind: str,
    host: str | None,
    action_id: int | None = None,
    payload: dict[str, Any] | None = None,
    notice_seconds: int = 0,
) -> str:
    """Queue ``kind`` for the instance, in the caller's transaction; returns its uuid. With
    ``notice_seconds`` (the caller decided a notice applies: ``notices.applies``) no agent
    takes it before that many seconds from now unless its guest acknowledges it."""
    if kind not in KINDS:
        raise ValueError(f"unknown operation kind {kind!r}")
    op_uuid = str(uuidlib.uuid4())
    not_before = utcnow() + dt.timedelta(seconds=notice_seconds) if notice_seconds else None
    operation = Operation(
        uuid=op_uuid,
        instance_uuid=instance_uuid,
        kind=kind,
        host=host,
        state=PENDING,
        action_id=action_id,
        payload=json.dumps(payload or {}, sort_keys=True),
        attempts=0,
        not_before=not_before,
    )
    session.add(operation)
    if not_before is not None:
        notices.scheduled(session, operation, notice_seconds=notice_seconds)
    announce(session, OPERATIONS, [host or ""])  # this process's agent, after commit
    notify(session, OPERATIONS, host or "")  # other processes' agents, at commit
    return op_uuid


@dataclass(frozen=True)
class Claimed:
    """An operation an agent took, as plain values (usable after the claim's transaction)."""

    id: int
    uuid: str
    instance_uuid: str
    kind: str
    action_id: int | None
    payload: dict[str, Any]
    attempts: int
    # The agent whose lease ran out, when this is a resumption; None for a first try.
    previous_owner: str | None


def claim(
    session: Session,
    *,
    host: str,
    owner: str,
    lease_seconds: float,
    limit: int,
    now: dt.datetime | None = None,
) -> list[Claimed]:
    """Take up to ``limit`` operations of ``host``: pending ones, and running ones whose lease
    expired. Each gets a lease in ``owner``'s name and one more attempt, all in one UPDATE
    (statements built once: an agent claims at every pass). The caller's transaction runs at
    ``CLAIM_ISOLATION``."""
    now = now or utcnow()
    locking = session.bind is not None and session.bind.dialect.name != "sqlite"
    rows = session.execute(
        _CLAIMABLE_LOCKED if locking else _CLAIMABLE,
        {"host": host, "now": now, "limit": limit},
    ).all()
    if not rows:
        return []
    expires = now + dt.timedelta(seconds=lease_seconds)
    session.execute(
        _TAKEN,
        {"ids": padded([row.id for row in rows]), "owner": owner, "expires": expires, "now": now},
    )
    claimed = []
    for row in rows:
        previous = row.lease_owner if row.state == RUNNING else None
        if previous is None and row.not_before is not None:  # its notice's event: taken
            operation = session.get(Operation, row.id, populate_existing=True)
            if operation is not None:
                notices.moved(session, operation, notice_rules.STARTED, now)
        claimed.append(
            Claimed(
                id=row.id,
                uuid=row.uuid,
                instance_uuid=row.instance_uuid,
                kind=row.kind,
                action_id=row.action_id,
                payload=payload_of(row.payload),
                attempts=row.attempts + 1,
                previous_owner=previous,
            )
        )
    return claimed


def _claimable(host: Any, now: Any) -> tuple[Any, ...]:
    """What ``claim`` takes: pending operations whose notice is over or acknowledged (or that
    have none), and running ones whose lease ran out."""
    return (
        Operation.host == host,
        or_(
            and_(
                Operation.state == PENDING,
                or_(
                    Operation.not_before.is_(None),
                    Operation.not_before <= now,
                    Operation.acknowledged_at.is_not(None),
                ),
            ),
            and_(Operation.state == RUNNING, Operation.lease_expires_at < now),
        ),
    )


_CLAIMABLE = (
    select(
        Operation.id,
        Operation.uuid,
        Operation.instance_uuid,
        Operation.kind,
        Operation.action_id,
        Operation.payload,
        Operation.attempts,
        Operation.state,
        Operation.lease_owner,
        Operation.not_before,
    )
    .where(*_claimable(bindparam("host"), bindparam("now")))
    .order_by(Operation.id)
    .limit(bindparam("limit"))
)
# PostgreSQL and MariaDB: agents of one host never wait on each other's rows.
_CLAIMABLE_LOCKED = _CLAIMABLE.with_for_update(skip_locked=True)
_TAKEN = (
    update(Operation)
    .where(Operation.id.in_(bindparam("ids", expanding=True)))
    .values(
        state=RUNNING,
        lease_owner=bindparam("owner"),
        lease_expires_at=bindparam("expires"),
        attempts=Operation.attempts + 1,
        updated_at=bindparam("now"),
    )
    .execution_options(synchronize_session=False)
)


def has_claimable(session: Session, *, host: str) -> bool:
    """Whether ``claim`` would take something now: one indexed read, no lock (an agent's cheap
    look before its claim's write transaction)."""
    found = session.scalar(select(Operation.id).where(*_claimable(host, utcnow())).limit(1))
    return found is not None


def has_waiting_notice(session: Session, *, host: str) -> bool:
    """Whether an operation of ``host`` waits for its notice to end or its guest to
    acknowledge it (agent/commit_watch.py watches for the acknowledgement meanwhile). Asked
    after every claim: a statement built once."""
    found = session.scalar(_WAITING_NOTICE, {"host": host, "now": utcnow()})
    return found is not None


_WAITING_NOTICE = (
    select(Operation.id)
    .where(
        Operation.host == bindparam("host"),
        Operation.state == PENDING,
        Operation.not_before > bindparam("now"),
        Operation.acknowledged_at.is_(None),
    )
    .limit(1)
)


def renew(session: Session, *, ids: list[int], owner: str, lease_seconds: float) -> set[int]:
    """Extend the leases ``owner`` still holds among ``ids``; returns the ids it still holds."""
    if not ids:
        return set()
    now = utcnow()
    listed = padded(ids)
    session.execute(
        update(Operation)
        .where(
            Operation.id.in_(listed),
            Operation.lease_owner == owner,
            Operation.state == RUNNING,
        )
        .values(lease_expires_at=now + dt.timedelta(seconds=lease_seconds), updated_at=now)
        .execution_options(synchronize_session=False)
    )
    held = session.scalars(
        select(Operation.id).where(
            Operation.id.in_(listed),
            Operation.lease_owner == owner,
            Operation.state == RUNNING,
        )
    )
    return set(held)


def holds(session: Session, op_id: int, *, owner: str) -> bool:
    """Whether ``owner`` still holds operation ``op_id``'s lease (its row locked until the
    caller's transaction ends, so the lease cannot change hands meanwhile)."""
    found = session.scalar(
        select(Operation.id)
        .where(Operation.id == op_id, Operation.lease_owner == owner, Operation.state == RUNNING)
        .with_for_update()
    )
    return found is not None


def finish(
    session: Session, op_id: int, *, owner: str, state: str, error: str | None = None
) -> bool:
    """End an operation ``owner`` holds, dropping the payload's secrets. False (and nothing
    written) when the lease is no longer ``owner``'s: the caller must then write nothing."""
    op = session.scalar(
        select(Operation)
        .where(Operation.id == op_id, Operation.lease_owner == owner, Operation.state == RUNNING)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if op is None:
        return False
    now = utcnow()
    op.state = state
    op.error = error
    op.finished_at = now
    op.updated_at = now
    op.lease_expires_at = None
    op.payload = json.dumps(_without_secrets(payload_of(op.payload)), sort_keys=True)
    notices.moved(session, op, notice_rules.ENDED[state], now)
    return True


def cancel_open(
    session: Session, instance_uuid: str, *, reason: str, keep: int | None = None
) -> int:
    """Cancel the instance's pending and running operations (an admin's reset, a delete), but
    ``keep`` (the noticed delete doing this): a late agent's ``finish`` then fails and it
    writes nothing, so their instance actions' open events are ended here, failed with
    ``reason``. Returns how many."""
    now = utcnow()
    ops = list(
        session.scalars(
            select(Operation)
            .where(
                Operation.instance_uuid == instance_uuid,
                Operation.state.in_(OPEN),
                Operation.id != (keep if keep is not None else -1),
            )
            .with_for_update()
        )
    )
    for op in ops:
        op.state = CANCELLED
        op.error = reason
        op.finished_at = now
        op.updated_at = now
        op.lease_expires_at = None
        op.payload = json.dumps(_without_secrets(payload_of(op.payload)), sort_keys=True)
        notices.moved(session, op, notice_rules.CANCELLED, now)
    action_log.finish_open(
        session, action_ids=[op.action_id for op in ops if op.action_id], error=reason
    )
    return len(ops)


def open_for(session: Session, instance_uuid: str) -> list[Operation]:
    return list(
        session.scalars(
            select(Operation)
            .where(Operation.instance_uuid == instance_uuid, Operation.state.in_(OPEN))
            .order_by(Operation.id)
        )
    )


def payload_of(stored: str | None) -> dict[str, Any]:
    """An operation's payload column, parsed (None: an empty payload)."""
    value: dict[str, Any] = json.loads(stored or "{}")
    return value


def _without_secrets(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in SECRET_KEYS}
