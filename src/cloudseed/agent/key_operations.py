"""Live keys on running guests (issue 17): the compute agent's ``keys`` operations.

The API queues one ``keys`` operation, payload ``{"generation": G}``, for each change of a
server's key set (``servers/live_keys/delivery.py``). Running it pushes the set as it is *now*
through the guest agent (``Driver.push_keys``): ``add`` the current, unexpired public keys,
``remove`` those cloudseed put on the guest (``keys_pushed``) that are no longer current, as
the login user (the image's ``os_admin_user``, else ``[keys] login_user``). Success records
``keys_pushed`` and marks the generation it read applied via "guest agent"; failure records
the agent's reason as the delivery's failure (``mark_failed``) and fails the operation. It is
never an instance fault: a key push that fails says nothing about the server's state.

Why each rule:

- **Superseded**: an operation older than the record's generation ends at once: the newer
  generation has its own operation, which pushes the newer set.
- **One push per instance at a time**, across all agents of the host (every serve worker runs
  one): a file lock under ``<state_path>/locks/``, held from reading the record to writing
  the outcome. Otherwise an older push could add back a key a newer one had just removed.
- **Retries**: a guest's agent starts late in its boot, and cloud-init creates the login user
  later still, so ``GuestAgentUnavailable`` is retried after each of ``PUSH_DELAYS`` (about
  three minutes in all) before it counts. A guest that is not running and has no operation
  under way (SHUTOFF, ERROR) fails at once: "guest is not running". An agent that stops
  leaves the operation to its lease: the host's next agent resumes it.
- **The boot set**: when a build or rebuild succeeds, ``keys_pushed`` becomes the keys the new
  disk gets at first boot (metadata, config drive or injection), so that the first push removes
  the keys taken away since. A build, rebuild, start or reboot that leaves the guest running
  with a generation newer than its boot set and than what the guest is known to hold (a change
  made while it was off, or whose push failed) queues a push (``after_operation``).
- **Expiry**: an expired key is no longer served, but a guest that got it keeps it. At each
  heartbeat the agent queues a push for its ACTIVE servers whose delivered keys include an
  expired one (``queue_expired``), unless a push is queued already or one failed after the
  expiry (a guest without an agent is not retried for ever).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Table, bindparam, or_, select, update
from sqlalchemy.orm import Session

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.errors import GuestAgentUnavailable, GuestNotRunning
from cloudseed.compute.interfaces import Driver
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.servers import records, states
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.lifecycle.ssh_access import image_admin_user
from cloudseed.servers.live_keys import delivery as key_delivery
from cloudseed.servers.models import Instance, InstanceExtra, Operation

log = logging.getLogger(__name__)

KIND = "keys"
EVENT = "compute_push_keys"  # the instance event, when the operation has an action
# Seconds between attempts: a booting guest's agent answers within a minute or two.
PUSH_DELAYS = (2.0, 4.0, 8.0, 15.0, 30.0, 30.0, 30.0, 30.0, 30.0)
LOCK_STRIPES = 256  # lock files, shared by instances whose uuids hash alike


def current_keys(entries: list[dict[str, Any]], now: dt.datetime) -> list[str]:
    """The SSH public keys a guest may use at ``now``, in order, each once (an x509 key pair
    is a certificate for WinRM, not an authorized_keys line)."""
    found: list[str] = []
    for entry in key_delivery.current([key_delivery.entry_defaults(e) for e in entries], now):
        key = str(entry.get("public_key") or "").strip()
        if entry["type"] == "ssh" and key and key not in found:
            found.append(key)
    return found


def delivered_keys(extra: InstanceExtra) -> list[str]:
    """The public keys cloudseed put on the guest: the boot set and every confirmed push
    (``keys_pushed``). A server from before live keys has none recorded: its boot set is
    taken as the keys it has had since its boot generation."""
    if extra.keys_pushed is not None:
        value: list[str] = json.loads(extra.keys_pushed)
        return value
    boot = extra.keys_boot_generation or 1
    entries = [key_delivery.entry_defaults(e) for e in json.loads(extra.keypairs or "[]")]
    return [
        str(e.get("public_key") or "").strip()
        for e in entries
        if e["since_generation"] <= boot and e["type"] == "ssh" and e.get("public_key")
    ]


@dataclass(frozen=True)
class _Tried:
    """An attempt that did not end the operation: why, and whether retrying can help."""

    reason: str
    generation: int
    final: bool


@dataclass
class KeyPusher:
    """Runs ``keys`` operations (``Steps.run`` hands them over)."""

    cells: CellDatabases
    driver: Driver
    owner: str
    lock_dir: Path
    login_user: str = "root"
    delays: tuple[float, ...] = PUSH_DELAYS
    # Set when the agent stops: a push waiting to retry gives up its turn at once.
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self, op: queue.Claimed, cell: Database) -> None:
        """Push, retrying; record the outcome (or nothing, when the lease was lost or the
        agent stops). Never raises."""
        try:
            tried: _Tried | None = None
            for delay in (0.0, *self.delays):
                if delay and self.stopping.wait(delay):
                    log.info("keys push %s left to the host's next agent", op.uuid)
                    return
                with self._locked(op.instance_uuid):
                    tried = self._attempt(op, cell)
                if tried is None or tried.final:
                    break
                log.info("keys push to %s: %s; trying again", op.instance_uuid, tried.reason)
            if tried is not None:
                self._failed(op, cell, tried.generation, tried.reason)
        except Exception:
            log.exception("keys operation %s on %s failed", op.uuid, op.instance_uuid)

    def give_up(self, op: queue.Claimed, cell: Database, reason: str) -> None:
        """An operation interrupted too often (its agents stopped each time)."""
        self._failed(op, cell, int(op.payload.get("generation") or 0), reason)

    # -- one attempt -------------------------------------------------------------------------

    def _attempt(self, op: queue.Claimed, cell: Database) -> _Tried | None:
        """None when the operation ended (pushed, superseded, instance gone)."""
        uuid = op.instance_uuid
        try:
            with cell.read() as session:
                record = records.load(session, uuid)
        except InstanceNotFound:
            self._finish(op, cell, queue.FAILED, error="The instance no longer exists.")
            return None
        generation = record.extra.keys_generation or 1
        if generation > int(op.payload.get("generation") or 0):
            log.info("keys push %s superseded by generation %d", op.uuid, generation)
            self._finish(op, cell, queue.DONE)
            return None
        instance = record.instance
        idle = instance.task_state is None
        if instance.vm_state != states.ACTIVE and idle:
            return _Tried(GuestNotRunning().reason, generation, final=True)
        add = current_keys(record.keypairs, utcnow())
        remove = [key for key in delivered_keys(record.extra) if key not in add]
        user = image_admin_user(self.cells, record) or self.login_user
        try:
            self.driver.push_keys(uuid, user=user, add=add, remove=remove)
        except GuestNotRunning as exc:
            return _Tried(exc.reason, generation, final=idle)  # a reboot: it comes back
        except GuestAgentUnavailable as exc:
            return _Tried(exc.reason, generation, final=False)
        except Exception as exc:  # the driver's bug: no retry will mend it
            log.exception("pushing keys to %s failed", uuid)
            return _Tried(f"{type(exc).__name__}: {exc}", generation, final=True)

        def record_pushed(session: Session) -> bool:
            if not self._finish_in(session, op, queue.DONE):
                return False
            records.set_extra(session, uuid, keys_pushed=add)
            key_delivery.mark_applied(
                session, uuid, generation=generation, via=key_delivery.VIA_GUEST_AGENT
            )
            return True

        if not cell.run(record_pushed, write=True):
            return None
        log.info(
            "keys of %s (generation %d) pushed as %s: %d added, %d removed",
            uuid,
            generation,
            user,
            len(add),
            len(remove),
        )
        return None

    # -- outcomes ----------------------------------------------------------------------------

    def _failed(self, op: queue.Claimed, cell: Database, generation: int, reason: str) -> None:
        log.warning("keys push to %s failed: %s", op.instance_uuid, reason)

        def record_failed(session: Session) -> None:
            if self._finish_in(session, op, queue.FAILED, error=reason):
                key_delivery.mark_failed(
                    session, op.instance_uuid, generation=generation, reason=reason
                )

        cell.run(record_failed, write=True)

    def _finish(
        self, op: queue.Claimed, cell: Database, state: str, error: str | None = None
    ) -> None:
        cell.run(lambda session: self._finish_in(session, op, state, error=error), write=True)

    def _finish_in(
        self, session: Session, op: queue.Claimed, state: str, error: str | None = None
    ) -> bool:
        """End the operation (and its action's event); False when the lease is lost."""
        if not queue.finish(session, op.id, owner=self.owner, state=state, error=error):
            log.info("keys operation %s was taken over or cancelled", op.uuid)
            return False
        if op.action_id is not None:
            action_log.finish(session, action_id=op.action_id, event=EVENT, error=error)
        return True

    @contextlib.contextmanager
    def _locked(self, uuid: str) -> Iterator[None]:
        """The instance's push lock, shared by every process of this host (flock)."""
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        stripe = zlib.crc32(uuid.encode()) % LOCK_STRIPES
        fd = os.open(self.lock_dir / f"keys-{stripe:02x}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


def after_operation(
    session: Session, uuid: str, *, kind: str, host: str | None, running: bool
) -> str | None:
    """In the transaction that records a successful ``kind``: a build or rebuild's boot set
    becomes ``keys_pushed``; a guest left running with keys it is not known to hold gets a
    push queued (its uuid returned)."""
    extra = session.scalar(
        select(InstanceExtra)
        .where(InstanceExtra.instance_uuid == uuid)
        .execution_options(populate_existing=True)
    )
    if extra is None:
        return None
    if kind in ("build", "rebuild"):
        boot_set = current_keys(json.loads(extra.keypairs or "[]"), utcnow())
        extra.keys_pushed = json.dumps(boot_set)
    generation = extra.keys_generation or 1
    behind = generation > max(extra.keys_applied_generation or 0, extra.keys_boot_generation or 1)
    if not (running and behind and host) or _push_queued(session, uuid):
        return None
    return queue.enqueue(
        session, instance_uuid=uuid, kind=KIND, host=host, payload={"generation": generation}
    )


_EXTRAS = cast(Table, InstanceExtra.__table__)
_BOOT_KEYS = select(
    _EXTRAS.c.instance_uuid,
    _EXTRAS.c.keypairs,
    _EXTRAS.c.keys_generation,
    _EXTRAS.c.keys_applied_generation,
    _EXTRAS.c.keys_boot_generation,
).where(_EXTRAS.c.instance_uuid.in_(bindparam("uuids", expanding=True)))
_BOOT_SET_KEPT = (
    update(_EXTRAS)
    .where(_EXTRAS.c.instance_uuid.in_(bindparam("uuids", expanding=True)))
    .values(keys_pushed=bindparam("boot_set"))
)


def after_builds(session: Session, hosts: dict[str, str | None], *, now: dt.datetime) -> list[str]:
    """``after_operation`` for many successful builds (instance uuid -> host), with one read
    and one UPDATE per distinct boot set; the uuids that got a push queued."""
    db = session.connection()
    by_boot_set: dict[str, list[str]] = {}
    queued = []
    for row in db.execute(_BOOT_KEYS, {"uuids": padded(hosts)}).all():
        boot_set = json.dumps(current_keys(json.loads(row.keypairs or "[]"), now))
        by_boot_set.setdefault(boot_set, []).append(row.instance_uuid)
        generation = row.keys_generation or 1
        behind = generation > max(row.keys_applied_generation or 0, row.keys_boot_generation or 1)
        host = hosts[row.instance_uuid]
        if behind and host and not _push_queued(session, row.instance_uuid):
            payload = {"generation": generation}
            queue.enqueue(
                session, instance_uuid=row.instance_uuid, kind=KIND, host=host, payload=payload
            )
            queued.append(row.instance_uuid)
    for boot_set, uuids in by_boot_set.items():
        db.execute(_BOOT_SET_KEPT, {"uuids": padded(uuids), "boot_set": boot_set})
    return queued


def queue_expired(cell: Database, *, host: str, now: dt.datetime) -> list[str]:
    """Queue a push for each ACTIVE, idle instance of ``host`` whose guest still has a key
    that has expired, unless a push is queued or one failed after the expiry; their uuids.
    Reads first: the write transaction is taken only when there is something to queue."""
    with cell.read() as session:
        due = _expired(session, host=host, now=now)
    if not due:
        return []

    def queue_pushes(session: Session) -> list[str]:
        queued: list[str] = []
        for uuid, generation in due:
            if not _push_queued(session, uuid):
                queue.enqueue(
                    session,
                    instance_uuid=uuid,
                    kind=KIND,
                    host=host,
                    payload={"generation": generation},
                )
                queued.append(uuid)
        return queued

    return cell.run(queue_pushes, write=True)


# How a dated expiry looks in a stored key set (json.dumps, with or without the space).
_DATED_EXPIRY = ('%"expires_at": "%', '%"expires_at":"%')


def _expired(session: Session, *, host: str, now: dt.datetime) -> list[tuple[str, int]]:
    rows = session.execute(
        select(Instance.uuid, InstanceExtra)
        .join(InstanceExtra, InstanceExtra.instance_uuid == Instance.uuid)
        .where(
            Instance.host == host,
            Instance.deleted == 0,
            Instance.vm_state == states.ACTIVE,
            Instance.task_state.is_(None),
            # Only sets with a key that expires at all (the JSON of a dated expires_at; the
            # check below decides): this runs at every heartbeat of every agent, and loading
            # and parsing every guest's set took a large host's workers seconds each time.
            or_(*(InstanceExtra.keypairs.like(pattern) for pattern in _DATED_EXPIRY)),
        )
    ).all()
    due = []
    for uuid, extra in rows:
        entries = [key_delivery.entry_defaults(e) for e in json.loads(extra.keypairs or "[]")]
        current = set(current_keys(entries, now))
        delivered = set(delivered_keys(extra))
        expired = [
            key_delivery.parse_time(e["expires_at"])
            for e in entries
            if key_delivery.is_expired(e, now)
            and str(e.get("public_key") or "").strip() in delivered - current
        ]
        if not expired:
            continue
        failure = json.loads(extra.keys_failure) if extra.keys_failure else None
        if failure and key_delivery.parse_time(failure["at"]) >= max(expired):
            continue  # tried since: its reason stands until the next change
        due.append((uuid, extra.keys_generation or 1))
    return due


def _push_queued(session: Session, uuid: str) -> bool:
    return (
        session.scalar(
            select(Operation.id)
            .where(
                Operation.instance_uuid == uuid,
                Operation.kind == KIND,
                Operation.state == queue.PENDING,
            )
            .limit(1)
        )
        is not None
    )
