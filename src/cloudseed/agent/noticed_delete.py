"""A delete with a notice (2.111), done by the agent of the server's host once the notice ends
or its guest acknowledges it: the delete a request without a notice does at once
(``servers/lifecycle/deletion.py``), whose queued destroy then removes the guest.

Three transactions, each safe to run again after the agent died between them (the next agent
resumes the operation): the cell database's part, skipped when an earlier attempt did it (the
instance is already deleted); the API database's part, which changes nothing the second time;
then the operation's end and its instance action's event. Each writes only while the lease is
still this agent's.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.servers import records
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.lifecycle import deletion, queue

log = logging.getLogger(__name__)


def run(cells: CellDatabases, op: queue.Claimed, cell: Database, *, owner: str) -> None:
    uuid = op.instance_uuid

    def in_cell(session: Session) -> bool:
        if not queue.holds(session, op.id, owner=owner):
            return False
        instance = records.load(session, uuid, for_update=True, read_deleted=True).instance
        if not instance.deleted:
            deletion.delete_in_cell(session, uuid, keep=op.id)
        return True

    def ended(session: Session) -> bool:
        if not queue.finish(session, op.id, owner=owner, state=queue.DONE):
            return False
        if op.action_id is not None:
            action_log.finish(session, action_id=op.action_id, event=deletion.TERMINATE_EVENT)
        return True

    if not cell.run(in_cell, write=True):
        log.info("noticed delete %s of %s was taken over or cancelled", op.uuid, uuid)
        return
    cells.api_db.run(lambda session: deletion.release_mapping(session, uuid), write=True)
    if not cell.run(ended, write=True):
        log.info("noticed delete %s of %s was taken over or cancelled", op.uuid, uuid)
