"""Instance actions and their events (``os-instance-actions``), as Nova records them: one
action per API request that changes an instance, events for each step the compute side took."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.db.in_lists import padded
from cloudseed.servers.errors import ActionNotFound
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.models import InstanceAction, InstanceActionEvent


def start(
    session: Session,
    *,
    instance_uuid: str,
    action: str,
    actor: Actor,
    event: str | None = None,
    details: str | None = None,
) -> int:
    row = new_action(instance_uuid=instance_uuid, action=action, actor=actor)
    session.add(row)
    session.flush()
    if event is not None:
        add_event(session, action_id=row.id, event=event, details=details)
    return row.id


def new_action(*, instance_uuid: str, action: str, actor: Actor) -> InstanceAction:
    """The row ``start`` adds, for a caller that adds many and flushes them together (its id
    is known once flushed)."""
    return InstanceAction(
        instance_uuid=instance_uuid,
        action=action,
        request_id=actor.request_id,
        user_id=actor.user_id,
        project_id=actor.project_id,
    )


def add_event(session: Session, *, action_id: int, event: str, details: str | None = None) -> None:
    """A started event of the (flushed) action ``action_id``."""
    session.add(InstanceActionEvent(action_id=action_id, event=event, details=details))


def finish(
    session: Session,
    *,
    action_id: int,
    event: str,
    error: str | None = None,
    details: str | None = None,
) -> None:
    now = utcnow()
    found = session.scalar(
        select(InstanceActionEvent).where(
            InstanceActionEvent.action_id == action_id,
            InstanceActionEvent.event == event,
            InstanceActionEvent.finish_time.is_(None),
        )
    )
    if found is None:
        found = InstanceActionEvent(action_id=action_id, event=event, start_time=now)
        session.add(found)
    found.finish_time = now
    found.result = "Error" if error else "Success"
    found.traceback = error
    if details:
        found.details = "; ".join(d for d in (found.details, details) if d)
    session.execute(
        update(InstanceAction)
        .where(InstanceAction.id == action_id)
        .values(finish_time=now, updated_at=now, message="Error" if error else None)
    )


def finish_open(session: Session, *, action_ids: list[int], error: str) -> None:
    """End every event still open in these actions as failed with ``error``: their operation
    was cancelled, and no agent will ever finish them (a late one's lease is gone)."""
    if not action_ids:
        return
    now = utcnow()
    listed = padded(action_ids)
    session.execute(
        update(InstanceActionEvent)
        .where(
            InstanceActionEvent.action_id.in_(listed),
            InstanceActionEvent.finish_time.is_(None),
        )
        .values(finish_time=now, result="Error", traceback=error)
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(InstanceAction)
        .where(InstanceAction.id.in_(listed), InstanceAction.finish_time.is_(None))
        .values(finish_time=now, updated_at=now, message="Error")
        .execution_options(synchronize_session=False)
    )


def _action_record(row: InstanceAction) -> dict[str, Any]:
    """An action as stored; ``servers.action_views`` decides what each microversion shows."""
    return {
        "action": row.action,
        "instance_uuid": row.instance_uuid,
        "request_id": row.request_id,
        "user_id": row.user_id,
        "project_id": row.project_id,
        "start_time": row.start_time,
        "message": row.message,
        "updated_at": row.updated_at or row.start_time,
    }


def list_actions(session: Session, instance_uuid: str) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(InstanceAction)
        .where(InstanceAction.instance_uuid == instance_uuid)
        .order_by(InstanceAction.start_time.desc(), InstanceAction.id.desc())
    )
    return [_action_record(r) for r in rows]


def show_action(session: Session, instance_uuid: str, request_id: str) -> dict[str, Any]:
    """The action with its events (key ``events``), as stored, oldest event first."""
    row = session.scalar(
        select(InstanceAction).where(
            InstanceAction.instance_uuid == instance_uuid, InstanceAction.request_id == request_id
        )
    )
    if row is None:
        raise ActionNotFound(request_id)
    record = _action_record(row)
    record["events"] = [
        {
            "event": ev.event,
            "start_time": ev.start_time,
            "finish_time": ev.finish_time,
            "result": ev.result,
            "traceback": ev.traceback,
            "details": ev.details,
        }
        for ev in session.scalars(
            select(InstanceActionEvent)
            .where(InstanceActionEvent.action_id == row.id)
            .order_by(InstanceActionEvent.id)
        )
    ]
    return record


def note(session: Session, *, action_id: int, event: str, details: str) -> None:
    """Record something that happened to an action's work (an interruption and its resumption)
    as a finished event of its own."""
    now = utcnow()
    session.add(
        InstanceActionEvent(
            action_id=action_id,
            event=event,
            start_time=now,
            finish_time=now,
            result="Success",
            details=details,
        )
    )
