"""Builds' successes recorded together: one transaction for the builds that finished while the
previous one was written (group commit), with set-based statements.

A build's success (``outcomes.record_success`` for one operation) wrote about a dozen ORM
statements and flushes in a transaction of its own, which made a build cost about six times
its create. Here the op threads of an agent hand their spawned builds to ``BuildOutcomes``:
the first to arrive writes every build waiting (including its own) in one transaction and the
others, which queued while it wrote, are written by the next one. Under a storm the batches
grow by themselves; a lone build is written alone, without waiting for company.

The transaction writes exactly what ``record_success`` writes for a build, for all of them:
each operation ended (``done``, secrets dropped) if its lease is still this agent's, the
instances ACTIVE/RUNNING with ``launched_at``, their fault cleared, their ``ssh_forward``
system metadata, the boot key set (``key_operations.after_builds``), a boot on the change
feed for each (``records.guests_booting``: no generation bump) and each instance action's
build event
finished. All or nothing: killed before the commit, every lease runs out and the builds are
resumed (a spawn stands on what it finds); after it, every outcome is there once.

A build whose lease was lost is left out (its entry answers ``Lost``), as ``queue.finish``
would. A build the statements cannot take (its instance gone, an operation with a notice, a
payload that applies values) is written alone by ``record_success``; so is every build of a
batch whose transaction failed, so one bad build never fails the others.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from sqlalchemy import BindParameter, Connection, Table, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from cloudseed.agent.key_operations import after_builds
from cloudseed.agent.outcomes import Lost, Outcome
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.servers import records, states
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.models import (
    Instance,
    InstanceAction,
    InstanceActionEvent,
    InstanceExtra,
    InstanceSystemMetadata,
    Operation,
)
from cloudseed.servers.system_metadata import SSH_FORWARD

log = logging.getLogger(__name__)

BUILD_EVENT = "compute__do_build_and_run_instance"
# What a build's payload may hold for it to be written here: what it passes to the spawn
# (dropped as secrets at the end), nothing it applies.
BATCHABLE_KEYS = frozenset(queue.SECRET_KEYS)

_OPERATIONS = cast(Table, Operation.__table__)
_INSTANCES = cast(Table, Instance.__table__)
_EXTRAS = cast(Table, InstanceExtra.__table__)
_SYSTEM_METADATA = cast(Table, InstanceSystemMetadata.__table__)
_EVENTS = cast(Table, InstanceActionEvent.__table__)
_ACTIONS = cast(Table, InstanceAction.__table__)


def batchable(op: queue.Claimed) -> bool:
    return op.kind == "build" and set(op.payload) <= BATCHABLE_KEYS


@dataclass
class Built:
    """One spawned build waiting for its outcome to be written."""

    op: queue.Claimed
    cell: Database
    ssh_forward: str | None
    done: threading.Event = field(default_factory=threading.Event)
    # After ``done``: "written", "lost" or "alone" (to be written by the single path).
    result: str = ""


@dataclass(frozen=True)
class Written:
    """What one batch transaction did: the operations it ended and those it left alone."""

    written: frozenset[int]
    alone: frozenset[int]


class BuildOutcomes:
    """The group commit of an agent's build successes. ``alone`` writes one build by itself
    (``outcomes.record_success``, given the build's ``Outcome``): the fallback."""

    def __init__(self, *, owner: str, alone: Callable[[queue.Claimed, Database, Outcome], None]):
        self.owner = owner
        self._alone = alone
        self._pending: list[Built] = []
        self._pending_lock = threading.Lock()
        self._writer = threading.Lock()  # one batch written at a time

    def record(self, op: queue.Claimed, cell: Database, ssh_forward: str | None) -> None:
        """Write ``op``'s success, in a batch with whatever else waits; returns once written.
        Raises ``Lost`` when the lease is no longer this agent's."""
        entry = Built(op, cell, ssh_forward)
        with self._pending_lock:
            self._pending.append(entry)
        with self._writer:
            if not entry.done.is_set():
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                self.write_batch(batch)
        if entry.result == "lost":
            raise Lost()
        if entry.result == "alone":
            self._alone(op, cell, _outcome(entry))

    def write_batch(self, batch: list[Built]) -> None:
        """Write ``batch`` in one transaction per cell; each entry's ``result`` says how it
        went (``record`` calls it; tests too)."""
        by_cell: dict[int, list[Built]] = {}
        for entry in batch:
            by_cell.setdefault(id(entry.cell), []).append(entry)
        for entries in by_cell.values():
            cell = entries[0].cell
            try:
                written = cell.run(
                    partial(write_successes, entries=entries, owner=self.owner), write=True
                )
            except Exception:
                log.exception("recording %d builds together failed; one by one", len(entries))
                written = Written(frozenset(), frozenset(e.op.id for e in entries))
            for entry in entries:
                if entry.op.id in written.written:
                    entry.result = "written"
                elif entry.op.id in written.alone:
                    entry.result = "alone"
                else:
                    entry.result = "lost"
                entry.done.set()


def _outcome(entry: Built) -> Outcome:
    return Outcome(states.ACTIVE, states.RUNNING, launched=True, ssh_forward=entry.ssh_forward)


def write_successes(session: Session, entries: list[Built], *, owner: str) -> Written:
    """The builds' successes in the caller's transaction (it may run again after a deadlock:
    statements only)."""
    db = session.connection()  # Core statements: the ORM's execute path cost a third more
    now = utcnow()
    wanted = {e.op.id: e for e in entries}
    held = db.execute(_HELD, {"ids": padded(wanted), "owner": owner}).all()
    uuids = [wanted[row.id].op.instance_uuid for row in held]
    hosts = dict(db.execute(_HOSTS, {"uuids": padded(uuids)}).all())
    alone = {
        row.id
        for row in held
        if row.not_before is not None or wanted[row.id].op.instance_uuid not in hosts
    }
    mine = [wanted[row.id] for row in held if row.id not in alone]
    if not mine:
        return Written(frozenset(), frozenset(alone))
    _end_operations(db, [(row.id, row.payload) for row in held if row.id not in alone], now)
    uuids = [e.op.instance_uuid for e in mine]
    listed = padded(uuids)
    db.execute(_LAUNCHED, {"uuids": listed, "now": now})
    # Nothing a guest sees changed (a payload that applies values is written alone), but the
    # guests boot now: every metadata worker loads them ahead of their first requests.
    records.guests_booting(session, uuids)
    db.execute(_FAULT_CLEARED, {"uuids": listed})
    db.execute(_FORWARDS_DROPPED, {"uuids": listed})
    forwards = [
        {"instance_uuid": e.op.instance_uuid, "key": SSH_FORWARD, "value": e.ssh_forward}
        for e in mine
        if e.ssh_forward is not None
    ]
    if forwards:  # records.set_system_metadata(..., SSH_FORWARD, value) for each
        db.execute(insert(_SYSTEM_METADATA), forwards)
    after_builds(session, {u: hosts[u] for u in uuids}, now=now)
    _finish_events(db, [e.op.action_id for e in mine if e.op.action_id is not None], now)
    return Written(frozenset(e.op.id for e in mine), frozenset(alone))


# The statements, built once (building a statement and its cache key each time cost as much
# as running it): each takes its lists as expanding parameters.
_HELD = (
    select(_OPERATIONS.c.id, _OPERATIONS.c.payload, _OPERATIONS.c.not_before)
    .where(
        _OPERATIONS.c.id.in_(bindparam("ids", expanding=True)),
        _OPERATIONS.c.lease_owner == bindparam("owner"),
        _OPERATIONS.c.state == queue.RUNNING,
    )
    .with_for_update()
)
_UUIDS: BindParameter[list[str]] = bindparam("uuids", expanding=True)
_HOSTS = (
    select(_INSTANCES.c.uuid, _INSTANCES.c.host)
    .where(_INSTANCES.c.uuid.in_(_UUIDS), _INSTANCES.c.deleted == 0)
    .with_for_update()
)
_ENDED = (
    update(_OPERATIONS)
    .where(_OPERATIONS.c.id.in_(bindparam("ids", expanding=True)))
    .values(
        state=queue.DONE,
        error=None,
        finished_at=bindparam("now"),
        updated_at=bindparam("now"),
        lease_expires_at=None,
        payload=bindparam("payload"),
    )
)
_LAUNCHED = (
    update(_INSTANCES)
    .where(_INSTANCES.c.uuid.in_(_UUIDS), _INSTANCES.c.deleted == 0)
    .values(
        vm_state=states.ACTIVE,
        task_state=None,
        power_state=states.RUNNING,
        updated_at=bindparam("now"),
        launched_at=bindparam("now"),
    )
)
_FAULT_CLEARED = (
    update(_EXTRAS)
    .where(_EXTRAS.c.instance_uuid.in_(_UUIDS), _EXTRAS.c.fault.is_not(None))
    .values(fault=None)
)
_FORWARDS_DROPPED = delete(_SYSTEM_METADATA).where(
    _SYSTEM_METADATA.c.instance_uuid.in_(_UUIDS), _SYSTEM_METADATA.c.key == SSH_FORWARD
)
_ACTION_IDS: BindParameter[list[int]] = bindparam("action_ids", expanding=True)
_OPEN_EVENTS = (
    select(_EVENTS.c.id, _EVENTS.c.action_id)
    .where(
        _EVENTS.c.action_id.in_(_ACTION_IDS),
        _EVENTS.c.event == BUILD_EVENT,
        _EVENTS.c.finish_time.is_(None),
    )
    .order_by(_EVENTS.c.id)
)
_EVENTS_FINISHED = (
    update(_EVENTS)
    .where(_EVENTS.c.id.in_(bindparam("event_ids", expanding=True)))
    .values(finish_time=bindparam("now"), result="Success", traceback=None)
)
_ACTIONS_FINISHED = (
    update(_ACTIONS)
    .where(_ACTIONS.c.id.in_(_ACTION_IDS))
    .values(finish_time=bindparam("now"), updated_at=bindparam("now"), message=None)
)


def _end_operations(db: Connection, rows: list[tuple[int, str | None]], now: dt.datetime) -> None:
    """``queue.finish`` for each (done, secrets dropped): one UPDATE per distinct payload left
    (builds' are all ``{}``)."""
    by_payload: dict[str, list[int]] = {}
    for op_id, payload in rows:
        kept = {k: v for k, v in json.loads(payload or "{}").items() if k not in queue.SECRET_KEYS}
        by_payload.setdefault(json.dumps(kept, sort_keys=True), []).append(op_id)
    for payload, ids in by_payload.items():
        db.execute(_ENDED, {"ids": padded(ids), "now": now, "payload": payload})


def _finish_events(db: Connection, action_ids: list[int], now: dt.datetime) -> None:
    """``action_log.finish(..., event=BUILD_EVENT)`` for each action: its open build event (the
    first, as there) finished as a success, or one added finished; the action finished."""
    if not action_ids:
        return
    first_open: dict[int, int] = {}
    listed = padded(action_ids)
    for event_id, action_id in db.execute(_OPEN_EVENTS, {"action_ids": listed}):
        first_open.setdefault(action_id, event_id)
    if first_open:
        db.execute(_EVENTS_FINISHED, {"event_ids": padded(first_open.values()), "now": now})
    missing = [a for a in action_ids if a not in first_open]
    if missing:
        added = {"event": BUILD_EVENT, "start_time": now, "finish_time": now, "result": "Success"}
        db.execute(insert(_EVENTS), [{"action_id": a, **added} for a in missing])
    db.execute(_ACTIONS_FINISHED, {"action_ids": listed, "now": now})
