"""Acknowledged lifecycle notices (2.111) in the databases: a server's events (its system
metadata, cell database), its guest's acknowledgements, and a project's defaults (API
database). Service functions: they take Sessions and never commit.

Every change of an event is a change its guest sees (``events.json``): ``guest_changed`` in the
same transaction, so every metadata worker drops its copy and the long-polls on it wake. An
acknowledgement also wakes the agents of the operation's host, as queueing it did
(``OPERATIONS``: in this process at once, on PostgreSQL through NOTIFY, elsewhere at their next
poll), so the operation starts at once.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.db.announcements import announce
from cloudseed.db.base import utcnow
from cloudseed.db.in_lists import padded
from cloudseed.db.notify import OPERATIONS, notify
from cloudseed.servers import records, states
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.models import InstanceSystemMetadata, Operation
from cloudseed.servers.notices import rules
from cloudseed.servers.notices.models import ProjectNoticeDefaults

# Instance action events (os-instance-actions) the notice adds to its operation's action.
NOTICE_EVENT = "cloudseed_notice_given"
ACKNOWLEDGED_EVENT = "cloudseed_notice_acknowledged"
# Ids one acknowledgement may name: a server keeps no more events than that.
MAX_ACKNOWLEDGED = rules.KEPT


def applies(notice_seconds: int, *, vm_state: str, host: str | None) -> bool:
    """Whether a notice is given: only to a running guest, which can read and acknowledge it.
    A stopped server, one in error or without a host has its operation at once."""
    return notice_seconds > 0 and vm_state == states.ACTIVE and host is not None


def events_of(session: Session, uuid: str) -> tuple[rules.Event, ...]:
    value = session.scalar(
        select(InstanceSystemMetadata.value).where(
            InstanceSystemMetadata.instance_uuid == uuid,
            InstanceSystemMetadata.key == rules.SYSTEM_METADATA_KEY,
        )
    )
    return rules.parse_stored(value)


def _write(session: Session, uuid: str, events: tuple[rules.Event, ...]) -> None:
    records.set_system_metadata(session, uuid, rules.SYSTEM_METADATA_KEY, rules.stored(events))
    records.guest_changed(session, uuid)


def scheduled(session: Session, operation: Operation, *, notice_seconds: int) -> None:
    """Record the event of ``operation`` (just queued with its ``not_before``), in the
    queueing transaction, and say so in its instance action."""
    assert operation.not_before is not None
    event = rules.Event(
        id=operation.uuid,
        type=rules.TYPES[operation.kind],
        notice_seconds=notice_seconds,
        not_before=operation.not_before,
    )
    uuid = operation.instance_uuid
    _write(session, uuid, rules.with_event(events_of(session, uuid), event))
    if operation.action_id is not None:
        action_log.note(
            session,
            action_id=operation.action_id,
            event=NOTICE_EVENT,
            details=(
                f"event {event.id}: {notice_seconds} s of notice to the guest, "
                f"not before {rules.shown_time(event.not_before)}"
            ),
        )


def moved(session: Session, operation: Operation, status: str, at: dt.datetime) -> None:
    """``operation``'s event moved to ``status`` (the agent took it, it ended, it was
    cancelled), in the transaction that changed the operation. Nothing for an operation
    without a notice."""
    if operation.not_before is None:
        return
    uuid = operation.instance_uuid
    before = events_of(session, uuid)
    after = rules.changed(before, operation.uuid, status, at)
    if after != before:
        _write(session, uuid, after)


def acknowledge(session: Session, uuid: str, event_ids: list[str]) -> list[str]:
    """The guest of server ``uuid`` acknowledges ``event_ids``: each of its own events still
    waiting for its notice may start now. Returns the ids among ``event_ids`` that are its own
    acknowledged events (newly or before: a replay changes nothing). An id of another server's
    event, or of none, is left out exactly like an id never issued, so the answer tells the
    caller nothing about other servers."""
    wanted = list(dict.fromkeys(event_ids))[:MAX_ACKNOWLEDGED]
    if not wanted:
        return []
    ops = list(
        session.scalars(
            select(Operation)
            .where(
                Operation.uuid.in_(padded(wanted)),
                Operation.instance_uuid == uuid,
                Operation.not_before.is_not(None),
            )
            .order_by(Operation.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    )
    now = utcnow()
    events = before = events_of(session, uuid)
    for op in ops:
        if op.state != "pending" or op.acknowledged_at is not None:
            continue  # started, ended or cancelled already; or a replay
        op.acknowledged_at = now
        op.updated_at = now
        events = rules.changed(events, op.uuid, rules.ACKNOWLEDGED, now)
        if op.action_id is not None:
            early = max(0.0, (op.not_before - now).total_seconds()) if op.not_before else 0.0
            action_log.note(
                session,
                action_id=op.action_id,
                event=ACKNOWLEDGED_EVENT,
                details=f"event {op.uuid}: acknowledged by the guest {early:.1f} s early",
            )
        host = op.host or ""
        announce(session, OPERATIONS, [host])  # this process's agents, after commit
        notify(session, OPERATIONS, host)  # other processes' agents, at commit
    if events != before:
        _write(session, uuid, events)
    return [op.uuid for op in ops if op.acknowledged_at is not None]


# -- project defaults (API database) ------------------------------------------------------------


def project_defaults(session: Session, project_id: str) -> dict[str, int]:
    row = session.get(ProjectNoticeDefaults, project_id)
    return rules.parse_defaults(row.notices if row is not None else None)


def set_project_defaults(session: Session, project_id: str, defaults: dict[str, int]) -> None:
    """Replace the project's defaults (empty: none)."""
    row = session.get(ProjectNoticeDefaults, project_id)
    if not defaults:
        if row is not None:
            session.delete(row)
        return
    text = rules.stored_defaults(defaults)
    if row is None:
        session.add(ProjectNoticeDefaults(project_id=project_id, notices=text))
    else:
        row.notices, row.updated_at = text, utcnow()
