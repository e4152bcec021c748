"""The agent loop: claim the operations of this host, run them, keep their leases, report.

One thread claims and renews; a pool of ``[DEFAULT] max_concurrent_builds`` threads runs
operations (``steps.Steps``). The loop wakes when an operation is queued in this process
(its announcer's ``OPERATIONS``), on PostgreSQL when another process queued one (a NOTIFY sent at
commit, ``db/notify.py``), on SQLite while a notice waits when another process committed work
for it (``commit_watch.py``), or every ``[compute] poll_interval_ms``. Each pass it:

- renews the leases of the operations it is running (every third of ``lease_seconds``); an
  operation whose lease it lost is left to whoever holds it now,
- reports a heartbeat (every ``[DEFAULT] report_interval``),
- claims what the free threads can take: pending operations of its host, and running ones
  whose lease ran out because their agent died, which it resumes. An operation interrupted
  ``MAX_ATTEMPTS`` times ends in ERROR with a fault that says so, so nothing loops for ever.
  A thread freed while most are busy first waits ``GATHER_SECONDS`` for others (builds
  written together end together), so one claim serves several,
- with each heartbeat, queues the pushes that take expired keys off its guests
  (``keys.queue_expired``).

Before its first pass it registers its host and reconciles the driver's guests with the
database (``reconcile.py``). Beside the loop, threads of their own: the host key console watch
(``hostkeys/watch.py``), the console mirror (``console_mirror.py``: each guest's console tail
stored for every API node) and the image cache's manager (``images.py``: eviction).

``stop`` marks the host's compute service down at once when this was its last running agent
(``presence.py``: the other workers of a serve keep it up), lets running operations finish for
a while, then leaves the rest to their leases: a new agent of the host resumes them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.agent.batch_reads import BatchRecords, batch_of
from cloudseed.agent.commit_watch import CommitWatch
from cloudseed.agent.console_mirror import ConsoleMirror
from cloudseed.agent.guests import ConfigDrives
from cloudseed.agent.images import AgentImages
from cloudseed.agent.key_operations import KeyPusher, queue_expired
from cloudseed.agent.presence import HostPresence
from cloudseed.agent.reconcile import reconcile_host
from cloudseed.agent.seed_urls import SeedUrls
from cloudseed.agent.steps import Steps
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import Capacity, Driver
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.db.notify import OPERATIONS, Listener
from cloudseed.hostkeys.watch import ConsoleWatch
from cloudseed.hosts import service as hosts
from cloudseed.images.cache import ImageCache
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.lifecycle import queue
from cloudseed.settings import Settings

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
GATHER_SECONDS = 0.02  # a claim per freed thread was a fifth of a build's CPU


class Agent:
    def __init__(
        self,
        settings: Settings,
        *,
        host: str,
        cells: CellDatabases,
        driver: Driver,
        drives: ConfigDrives | None = None,
        build_check: Callable[[str], None] | None = None,
        image_cache: ImageCache | None = None,
    ) -> None:
        """``image_cache``: where the guests' images come from (``agent/images.py``); None for a
        driver that reads no image data (the fake one)."""
        self.settings = settings
        self.host = host
        self.cells = cells
        self.driver = driver
        self.drives = drives
        self.build_check = build_check
        # Unique per agent run: a restarted agent is another owner, so it resumes (not
        # mistakes for its own) the operations its previous run held.
        self.owner = f"{host}/{os.getpid()}/{uuidlib.uuid4().hex[:8]}"
        self.lease = float(settings.compute.lease_seconds)
        self.poll = settings.compute.poll_interval_ms / 1000
        self.slots = settings.default.max_concurrent_builds
        self._stopping = threading.Event()
        keys = KeyPusher(
            cells=cells,
            driver=driver,
            owner=self.owner,
            lock_dir=settings.state_dir / "locks",
            login_user=settings.keys.login_user,
            stopping=self._stopping,
        )
        self.images = AgentImages(settings, cells, host=host, driver=driver, cache=image_cache)
        self.steps = Steps(
            cells=cells,
            driver=driver,
            owner=self.owner,
            drives=drives,
            build_check=build_check,
            keys=keys,
            images=self.images,
            seeds=SeedUrls.from_settings(settings),
        )
        self._executor = ThreadPoolExecutor(self.slots, thread_name_prefix="cloudseed-op")
        self._running: dict[int, tuple[Database, Future[None]]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._unlisten: Callable[[], None] | None = None
        self._listeners: list[Listener] = []
        self._last_renew = self._last_heartbeat = self._last_look = 0.0
        self._commits = CommitWatch(host=host)  # SQLite, while a notice waits
        self.presence = HostPresence(settings.state_dir / "locks", host)
        # The console fallback for host keys: a thread of its own, reading the consoles of
        # this host's newly launched guests that did not phone home (hostkeys/watch.py).
        self.console_watch = ConsoleWatch(cells, host=host, console_output=driver.console_output)
        # The end of each guest's console, stored for every API node (console_mirror.py).
        self.console_mirror = ConsoleMirror(
            cells,
            host=host,
            driver=driver,
            interval=float(settings.compute.console_tail_interval),
            lock_dir=settings.state_dir / "locks",
        )

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.presence.join()
        self.register()
        self.reconcile()
        self._unlisten = self.cells.api_db.announcer.subscribe(OPERATIONS, self._on_enqueued)
        for cell in self.cells.all_cells():
            if cell.engine.dialect.name == "postgresql":
                listener = Listener(
                    str(cell.engine.url.render_as_string(hide_password=False)),
                    OPERATIONS,
                    self._on_notify,
                )
                listener.start()
                self._listeners.append(listener)
        self._thread = threading.Thread(target=self._loop, name="cloudseed-agent", daemon=True)
        self._thread.start()
        self.console_watch.start()
        self.console_mirror.start()
        self.images.start()
        log.info("compute agent %s started (driver %s)", self.owner, self.driver.name)

    def stop(self, timeout: float = 30) -> None:
        """Stop claiming; mark the host down when no other agent of it runs; let running
        operations finish within ``timeout``; the others are resumed by the host's next agent
        once their leases run out."""
        self._stopping.set()
        self._wake.set()
        self.console_watch.stop()
        self.console_mirror.stop()
        self.images.stop()
        if self._unlisten is not None:
            self._unlisten()
        for listener in self._listeners:
            listener.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if not self._thread.is_alive():
                self._commits.close()
        # After the loop's last heartbeat, so none marks the host up again.
        self._mark_down_if_last()
        deadline = time.monotonic() + timeout
        while self._busy() and time.monotonic() < deadline:
            self._renew()
            time.sleep(min(0.05, self.lease / 3))
        self._executor.shutdown(wait=False, cancel_futures=True)

    def close(self, *, own_driver: bool = True) -> None:
        """After ``stop``: release the drive builder and vendordata check, and (when the agent
        made its driver) the driver, so no guest process outlives the service."""
        for resource in (self.drives, self.build_check, self.images):
            close = getattr(resource, "close", None)
            if close is not None:
                close()
        if own_driver:
            self.driver.close()

    def _mark_down_if_last(self) -> None:
        if not self.presence.leave_last():
            return
        try:
            for cell in self.cells.all_cells():
                cell.run(lambda session: hosts.stopped(session, host=self.host), write=True)
            log.info("compute host %s marked down: its last agent stopped", self.host)
        except Exception:  # the database is away: the heartbeat rule marks it down instead
            log.exception("compute agent %s: marking the host down failed", self.owner)
        finally:
            self.presence.release()

    def wake(self) -> None:
        self._wake.set()

    def idle(self) -> bool:
        return not self._busy()

    def register(self) -> None:
        capacity = self.driver.capacity()
        zone = self.settings.default.default_availability_zone
        resources = Capacity(
            vcpus=self.settings.compute.vcpus or capacity.vcpus,
            memory_mb=self.settings.compute.memory_mb or capacity.memory_mb,
            disk_gb=self.settings.compute.disk_gb or capacity.disk_gb,
            hypervisor_type=capacity.hypervisor_type,
            hypervisor_hostname=capacity.hypervisor_hostname or self.host,
        )

        def work(session: Session) -> None:
            hosts.register(session, host=self.host, zone=zone, capacity=resources)

        for cell in self.cells.all_cells():
            try:
                cell.run(work, write=True)
            except IntegrityError:
                # Another agent of the host (a serve's other worker, starting with this one)
                # inserted its first rows meanwhile: now there are rows to refresh.
                cell.run(work, write=True)
        self._last_heartbeat = time.monotonic()

    def reconcile(self) -> None:
        """Compare what the driver has with what the database says, once, when the agent
        starts (``reconcile.py``)."""
        reconcile_host(
            self.cells,
            self.driver,
            host=self.host,
            owner=self.owner,
            resume=self.settings.default.resume_guests_state_on_host_boot,
        )

    def run_once(self) -> int:
        """Claim what there is and run it in this thread (tests, tools); how many ran."""
        count = 0
        for cell in self.cells.all_cells():
            claimed = self._claim(cell, self.slots)
            batch = batch_of(claimed, cell)
            for op in claimed:
                self.steps.run(op, cell, batch)
                count += 1
        return count

    # -- the loop ----------------------------------------------------------------------------

    def _on_enqueued(self, hosts_with_work: frozenset[str]) -> None:
        if self.host in hosts_with_work:
            self._wake.set()

    def _on_notify(self, host: str) -> None:
        if host == self.host:
            self._wake.set()

    def _loop(self) -> None:
        woken = True  # look for work at once when starting
        while not self._stopping.is_set():
            try:
                self._pass(look=woken or time.monotonic() - self._last_look >= self.poll)
            except Exception:  # a database outage: keep going, the leases tell the truth
                log.exception("compute agent %s: pass failed", self.owner)
            # Wake for lease renewals even when nothing else happens; look for new work only
            # when told (in-process queueing, NOTIFY, a freed thread, another process's
            # commit on SQLite) or every poll interval.
            quick = self._commits.interval or self.poll
            woken = self._wake.wait(timeout=min(self.poll, self.lease / 3, quick))
            if woken and 0 < self.slots - len(self._running_ids()) < max(self.slots // 2, 1):
                # Threads freed while others run: wait a moment for those finishing with them
                # (a batch's builds end together), so one claim takes work for all of them.
                self._stopping.wait(GATHER_SECONDS)
            self._wake.clear()
            if not woken and quick < self.poll:
                woken = self._commits.work_waiting()

    def _pass(self, *, look: bool) -> None:
        now = time.monotonic()
        if now - self._last_renew >= self.lease / 3:
            self._renew()
        if now - self._last_heartbeat >= self.settings.default.report_interval:
            self._heartbeat()
            self.expire_keys()
        if not look:
            return
        self._last_look = now
        free = self.slots - len(self._running_ids())
        if free <= 0:
            return
        for cell in self.cells.all_cells():
            claimed = self._claim(cell, free)
            batch = batch_of(claimed, cell)
            for op in claimed:
                self._submit(op, cell, batch)
                free -= 1
            if free <= 0:
                break

    def _claim(self, cell: Database, limit: int) -> list[queue.Claimed]:
        claimed = cell.run(
            partial(self._claim_in, limit=limit, cell=cell),
            write=True,
            isolation=queue.CLAIM_ISOLATION,
        )
        runnable = []
        for op in claimed:
            if op.attempts > MAX_ATTEMPTS:
                self.steps.give_up(
                    op,
                    cell,
                    f"The {op.kind} operation was interrupted {op.attempts - 1} times "
                    "(its compute agent stopped each time); giving up.",
                )
            else:
                runnable.append(op)
        return runnable

    def _claim_in(self, session: Session, *, limit: int, cell: Database) -> list[queue.Claimed]:
        claimed = queue.claim(
            session, host=self.host, owner=self.owner, lease_seconds=self.lease, limit=limit
        )
        self._commits.arm(cell, session)
        for op in claimed:
            if op.previous_owner is not None and op.action_id is not None:
                action_log.note(
                    session,
                    action_id=op.action_id,
                    event="compute_resume_operation",
                    details=(
                        f"interrupted: agent {op.previous_owner} lost its lease; "
                        f"resumed by {self.owner} (attempt {op.attempts})"
                    ),
                )
        return claimed

    def _submit(self, op: queue.Claimed, cell: Database, batch: BatchRecords | None) -> None:
        future = self._executor.submit(self.steps.run, op, cell, batch)
        with self._lock:
            self._running[op.id] = (cell, future)
        future.add_done_callback(partial(self._done, op.id))

    def _done(self, op_id: int, _future: Future[None]) -> None:
        with self._lock:
            self._running.pop(op_id, None)
        self._wake.set()  # a thread is free

    def _running_ids(self) -> dict[int, Database]:
        with self._lock:
            return {op_id: cell for op_id, (cell, _f) in self._running.items()}

    def _busy(self) -> bool:
        with self._lock:
            return bool(self._running)

    def _renew(self) -> None:
        self._last_renew = time.monotonic()
        by_cell: dict[int, tuple[Database, list[int]]] = {}
        for op_id, cell in self._running_ids().items():
            by_cell.setdefault(id(cell), (cell, []))[1].append(op_id)
        for cell, ids in by_cell.values():
            try:
                held = cell.run(
                    partial(queue.renew, ids=ids, owner=self.owner, lease_seconds=self.lease),
                    write=True,
                )
            except Exception:
                log.exception("compute agent %s: renewing leases failed", self.owner)
                continue
            for lost in set(ids) - held:
                log.warning("compute agent %s lost the lease of operation %d", self.owner, lost)

    def expire_keys(self) -> int:
        """Queue a push for each guest of this host that still has a key that expired
        (``keys.queue_expired``); how many were queued."""
        queued = 0
        for cell in self.cells.all_cells():
            try:
                queued += len(queue_expired(cell, host=self.host, now=utcnow()))
            except Exception:
                log.exception("compute agent %s: looking for expired keys failed", self.owner)
        return queued

    def _heartbeat(self) -> None:
        # A full registration, not only a timestamp: rows removed behind the agent's back
        # (an operator's cleanup, a test's) come back at the next heartbeat.
        try:
            self.register()
        except Exception:
            log.exception("compute agent %s: heartbeat failed", self.owner)
