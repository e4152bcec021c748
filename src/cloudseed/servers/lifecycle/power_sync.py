"""What a compute agent records when it finds a guest switched off that the database shows
running (``Agent.reconcile``, at the agent's start). Session-taking; the caller owns the
transaction.

Two answers, as Nova's ``[DEFAULT] resume_guests_state_on_host_boot`` chooses between them:

- ``queue_start``: start the guest again through the durable path, exactly as ``os-start``
  does (``Servers.start``): claim the task (``powering-on``), start the instance action
  ``start`` and queue a ``start`` operation, in one transaction. The one difference is the
  vm_state the claim accepts: the instance is ACTIVE (os-start accepts only STOPPED).
- ``record_shutdown``: write the truth, as Nova's power-state sync does ("Instance shutdown
  by itself. Calling the stop API."): vm_state STOPPED, power state SHUTDOWN, no SSH forward,
  and a finished instance action ``stop``.

Both change the instance only while it is still idle and ACTIVE, so an API request that got
there first (or another agent of the same host, as the serve workers each run one) wins,
and nothing is recorded twice.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.orm import Session

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.db.base import utcnow
from cloudseed.servers import records, states
from cloudseed.servers.errors import InstanceInvalidState
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.models import Instance
from cloudseed.servers.system_metadata import SSH_FORWARD

START_EVENT = "compute_start_instance"
STOP_EVENT = "compute_stop_instance"


def queue_start(
    session: Session, uuid: str, *, host: str, actor: Actor, details: str
) -> str | None:
    """Queue a start of the ACTIVE, idle instance ``uuid`` on ``host``; the operation's uuid,
    or None when the instance is no longer ACTIVE and idle (nothing written)."""
    try:
        records.claim_task(
            session,
            uuid,
            operation="start",
            task_state=states.POWERING_ON,
            allowed=(states.ACTIVE,),
        )
    except (InstanceInvalidState, InstanceNotFound):
        return None
    action_id = action_log.start(
        session,
        instance_uuid=uuid,
        action="start",
        actor=actor,
        event=START_EVENT,
        details=details,
    )
    return queue.enqueue(
        session,
        instance_uuid=uuid,
        kind="start",
        host=host,
        action_id=action_id,
        payload={"details": details},
    )


def record_shutdown(session: Session, uuid: str, *, actor: Actor, details: str) -> bool:
    """Record the ACTIVE, idle instance ``uuid`` as switched off (SHUTOFF); False when it is
    no longer ACTIVE and idle (nothing written)."""
    result = session.execute(
        update(Instance)
        .where(
            Instance.uuid == uuid,
            Instance.deleted == 0,
            Instance.task_state.is_(None),
            Instance.vm_state == states.ACTIVE,
        )
        .values(vm_state=states.STOPPED, power_state=states.SHUTDOWN, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    # What a stop leaves (agent/steps.py): no way into a guest that does not run. As there,
    # no change a guest sees: the metadata service does not serve the power state.
    records.set_system_metadata(session, uuid, SSH_FORWARD, None)
    action_id = action_log.start(
        session, instance_uuid=uuid, action="stop", actor=actor, event=STOP_EVENT, details=details
    )
    action_log.finish(session, action_id=action_id, event=STOP_EVENT)
    return True
