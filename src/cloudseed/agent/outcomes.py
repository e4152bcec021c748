"""How an operation's outcome is recorded, once, by whoever holds its lease.

``steps.py`` runs the operation; its outcome is written here in one transaction that also ends
the operation (``queue.finish``), or not at all when the lease was lost (``Lost``).

A success writes the instance's new vm/task/power state, the values the operation applies
(``apply_payload``: a rebuild's key pair, user data, name, hostname, metadata and image; a HARD
reboot's user data) with their history, the ``ssh_forward`` system metadata, a new boot for
readiness, the key pushes to queue and the instance action's event. A failure writes the
fault (``record_fault``) and the action's event.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from cloudseed.agent.key_operations import after_operation
from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.errors import fault_message
from cloudseed.servers import records, states
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.history import bootstrap as history
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle import edits, queue
from cloudseed.servers.live_keys import store as live_keys
from cloudseed.servers.models import Instance
from cloudseed.servers.readiness import store as readiness
from cloudseed.servers.system_metadata import SSH_FORWARD

log = logging.getLogger(__name__)

# The kinds that boot the same disk again: a new boot for readiness (servers/readiness/).
BOOTS_AGAIN = frozenset({"reboot_soft", "reboot_hard", "start"})
# Operations after which the guest boots: its metadata is loaded ahead in every worker.
BOOTS = BOOTS_AGAIN | {"build", "rebuild"}


@dataclass(frozen=True)
class Outcome:
    """Instance columns to set when the driver call succeeded."""

    vm_state: str
    power_state: int
    launched: bool = False
    ssh_forward: str | None = None


class Lost(Exception):
    """The lease is no longer ours: someone else records this operation's outcome."""


def record_success(
    op: queue.Claimed,
    cell: Database,
    event: str,
    outcome: Outcome,
    *,
    cells: CellDatabases,
    owner: str,
) -> None:
    """Record ``op``'s success: the instance's new state, the values it applies
    (``apply_payload``), its system metadata, readiness, key pushes to queue and the action's
    event."""
    uuid = op.instance_uuid
    now = utcnow()
    values: dict[str, Any] = {
        "vm_state": outcome.vm_state,
        "task_state": None,
        "power_state": outcome.power_state,
        "updated_at": now,
    }
    if outcome.launched:
        values["launched_at"] = now
    p = op.payload

    def record_success(session: Session) -> None:
        if not queue.finish(session, op.id, owner=owner, state=queue.DONE):
            raise Lost()
        before = records.load(session, uuid, for_update=True)
        applied = apply_payload(session, op, before, cells=cells)
        session.execute(
            update(Instance)
            .where(Instance.uuid == uuid, Instance.deleted == 0)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if applied:
            records.guest_changed(session, uuid)
        records.set_extra(session, uuid, fault=None)
        records.set_system_metadata(session, uuid, SSH_FORWARD, outcome.ssh_forward)
        running = outcome.power_state == states.RUNNING
        if running and op.kind in BOOTS:
            records.guests_booting(session, [uuid])
        if op.kind in BOOTS_AGAIN:  # readiness (2.110): pending until the guest reports
            readiness.boot_began(session, uuid)
        after_operation(session, uuid, kind=op.kind, host=before.instance.host, running=running)
        if op.action_id is not None:
            action_log.finish(
                session, action_id=op.action_id, event=event, details=p.get("details")
            )

    cell.run(record_success, write=True)


def apply_payload(
    session: Any, op: queue.Claimed, before: records.ServerRecord, *, cells: CellDatabases
) -> bool:
    """Write the values the operation applies on success, with their history; True when
    something a guest sees changed."""
    p = op.payload
    actor = Actor(**p["actor"]) if "actor" in p else None
    uuid = op.instance_uuid
    changes: dict[str, Any] = {}
    # Described before anything is written: the record's objects change with the writes.
    old_user_data = history.describe_user_data(before.instance.user_data)
    if op.kind == "rebuild":
        changes.update(
            {k: v for k, v in p.get("apply", {}).items() if k in records.REBUILD_COLUMNS}
        )
        # The key set (2.106): a new generation the new disk boots with, and its history.
        project = live_keys.project_reader(cells.api_db, before.instance.project_id)
        changes.update(
            live_keys.rebuilt(session, before, p.get("keypairs"), actor=actor, project=project)
        )
        if "metadata" in p:
            edits.replace_metadata(session, uuid, p["metadata"])
    if "user_data" in p:
        changes["user_data"] = p["user_data"][0]
        if actor is not None:
            history.record(
                session,
                instance_uuid=uuid,
                field="user_data",
                action="rebuild" if op.kind == "rebuild" else "reboot",
                actor=actor,
                old=old_user_data,
                new=history.describe_user_data(p["user_data"][0]),
            )
    if changes:
        session.execute(
            update(Instance)
            .where(Instance.uuid == uuid, Instance.deleted == 0)
            .values(**changes)
            .execution_options(synchronize_session=False)
        )
    return bool(changes) or "keypairs" in p or "metadata" in p or op.kind == "rebuild"


def record_failure(
    op: queue.Claimed,
    cell: Database,
    event: str,
    exc: Exception,
    values: dict[str, Any],
    *,
    owner: str,
) -> None:
    """Record ``op``'s failure: the fault (with ``values``, the instance's new state) and the
    action's event."""
    message = fault_message(exc)
    log.warning("operation %s on %s failed: %s: %s", event, op.instance_uuid, message, exc)
    uuid = op.instance_uuid

    def record_failure(session: Session) -> None:
        if not queue.finish(session, op.id, owner=owner, state=queue.FAILED, error=message):
            raise Lost()
        record_fault(session, uuid, message, "".join(traceback.format_exception(exc)), values)
        if op.action_id is not None:
            action_log.finish(session, action_id=op.action_id, event=event, error=message)

    cell.run(record_failure, write=True)


def record_fault(
    session: Any, uuid: str, message: str, details: str, values: dict[str, Any]
) -> None:
    """Clear the task (with ``values``) and record the fault, in the caller's transaction."""
    now = utcnow()
    session.execute(
        update(Instance)
        .where(Instance.uuid == uuid, Instance.deleted == 0)
        .values(task_state=None, updated_at=now, **values)
        .execution_options(synchronize_session=False)
    )
    records.set_extra(
        session,
        uuid,
        fault={
            "code": 500,
            "message": message,
            "created": now.isoformat(),
            "details": details[-4000:],
        },
    )
