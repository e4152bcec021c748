"""Deleting a server: at once, when the request comes (``service.Servers.delete``), or, with a
notice (2.111), by its host's agent when the notice ends or its guest acknowledges it
(``agent/noticed_delete.py``). Both delete the same way, in two transactions: the cell database
first (the instance marked deleted, its addresses, ports and tags gone, the metadata service
told, the guest's destroy queued), then the API database (its addresses freed, its mapping
queued for delete). Session-taking functions; the callers own the transactions.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from cloudseed.cells.models import InstanceMapping
from cloudseed.db.base import utcnow
from cloudseed.networks import service as networks
from cloudseed.servers import records, states
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.models import FixedIP, Instance, InstanceTag, Port

# Nova's event of a delete's instance action; a noticed delete's agent finishes it.
TERMINATE_EVENT = "compute_terminate_instance"


def delete_in_cell(session: Session, uuid: str, *, keep: int | None = None) -> None:
    """The cell database's part: every open operation cancelled but ``keep`` (the noticed
    delete doing this), the instance deleted, its guest's destroy queued."""
    instance = records.load(session, uuid, for_update=True).instance
    now = utcnow()
    queue.cancel_open(session, uuid, reason="the instance was deleted", keep=keep)
    session.execute(delete(FixedIP).where(FixedIP.instance_uuid == uuid))
    session.execute(delete(Port).where(Port.instance_uuid == uuid))
    # Nova drops a server's tags when it deletes it: a deleted server shows none.
    session.execute(delete(InstanceTag).where(InstanceTag.instance_uuid == uuid))
    session.execute(
        update(Instance)
        .where(Instance.uuid == uuid)
        .values(
            deleted=instance.id,
            deleted_at=now,
            terminated_at=now,
            vm_state=states.DELETED,
            task_state=None,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    records.guest_changed(session, uuid)
    if instance.host is not None:
        queue.enqueue(session, instance_uuid=uuid, kind="destroy", host=instance.host)


def release_mapping(session: Session, uuid: str) -> None:
    """The API database's part: the addresses freed, the mapping queued for delete. Doing it
    again changes nothing (a resumed noticed delete may)."""
    networks.release(session, instance_uuid=uuid)
    session.execute(
        update(InstanceMapping)
        .where(InstanceMapping.instance_uuid == uuid)
        .values(queued_for_delete=True, updated_at=utcnow())
    )


def schedule(
    session: Session,
    uuid: str,
    *,
    actor: Actor,
    host: str,
    notice_seconds: int,
    actor_payload: dict[str, Any],
) -> None:
    """A delete with a notice: whatever the instance had open is cancelled (a delete wins, as
    without a notice), its task is ``deleting``, and the delete is queued for its host's agent
    with the notice. The server stays, and its guest is served, until then."""
    queue.cancel_open(session, uuid, reason="replaced by a delete with a notice")
    session.execute(
        update(Instance)
        .where(Instance.uuid == uuid, Instance.deleted == 0)
        .values(task_state=states.DELETING, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    action_id = action_log.start(
        session, instance_uuid=uuid, action="delete", actor=actor, event=TERMINATE_EVENT
    )
    queue.enqueue(
        session,
        instance_uuid=uuid,
        kind="delete",
        host=host,
        action_id=action_id,
        payload={"actor": actor_payload},
        notice_seconds=notice_seconds,
    )
