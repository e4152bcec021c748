"""The compute agent's ``keys`` operation (2.106): a server's key set changed while it runs
(``servers/live_keys.py`` queues it, payload ``{"generation": G}``).

Until the guest agent push exists (the driver's ``push_keys``), the step records the truth:
generation G was not delivered this way, so the delivery state says ``failed`` with the
reason, unless the login-time check or the metadata service delivered it. It ends the
operation in the same transaction, so the agent never retries or loops on it.
"""

from __future__ import annotations

from cloudseed.compute.interfaces import Driver
from cloudseed.db.engines import Database
from cloudseed.servers import key_delivery, queue

NOT_DELIVERED = "not delivered: no guest agent support yet"


class LeaseLost(Exception):
    """The operation is no longer this agent's (someone else records its outcome)."""


def deliver(op: queue.Claimed, cell: Database, *, owner: str, driver: Driver) -> None:
    """Run a ``keys`` operation to its end; raises LeaseLost when the lease is gone."""
    del driver  # the guest agent push will use it
    generation = int(op.payload.get("generation", 0))
    with cell.write() as session:
        if not queue.finish(session, op.id, owner=owner, state=queue.FAILED, error=NOT_DELIVERED):
            raise LeaseLost()
        key_delivery.mark_failed(
            session, op.instance_uuid, generation=generation, reason=NOT_DELIVERED
        )
