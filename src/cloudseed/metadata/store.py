"""Guests' documents held in memory, found by address or instance id, and dropped the moment
the instance changes, in every worker.

Changes reach every worker through the cells' change feed (``guest_changes``, written in the
same transaction as the change). On PostgreSQL each worker LISTENs on every cell (a NOTIFY is
sent when a change commits, servers/records.py) and reads the feed as soon as it is told (no
sooner than ``change_poll_interval_ms`` after its last read, so a busy API costs no more than
polling did), otherwise every ``change_fallback_interval_ms``; while a cell's LISTEN connection
is down, and on SQLite and MariaDB (no NOTIFY), it polls every ``change_poll_interval_ms``; on
SQLite a poll reads the feed only when ``PRAGMA data_version`` says another connection has
committed since the last one (db/data_version.py), so an idle cloud costs no query. A
LISTEN connection that comes back is followed by a read at once: what committed meanwhile was
not announced. Rows can commit out of id order (concurrent writers on PostgreSQL and
MariaDB), so ids skipped over are watched for a while in case they commit late (a late commit
sends its own NOTIFY). A change read while the same instance is being loaded makes that load's
result uncacheable, so an old copy never outlives a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.data_version import DataVersion
from cloudseed.db.engines import Database
from cloudseed.db.notify import GUEST_CHANGES, Listener
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.heap import HeapFreezer
from cloudseed.metadata.loading import BY_ADDRESS, BY_UUID, Key, load_guests
from cloudseed.metadata.stats import NO_STATS, StoreStats
from cloudseed.servers.models import GuestChange

log = logging.getLogger(__name__)

GAP_PATIENCE = 10.0  # seconds a skipped change id is watched for
FEED_RETENTION = dt.timedelta(minutes=10)
PRUNE_EVERY = 60.0
BATCH_SIZE = 200  # guests loaded per thread hop at most


def _wake(nap: asyncio.Future[None] | None) -> None:
    if nap is not None and not nap.done():
        nap.set_result(None)


@dataclass
class _Feed:
    cell: Database
    cursor: int
    gaps: dict[int, float] = field(default_factory=dict)  # id -> give up at
    probe: DataVersion | None = None  # SQLite: whether anything committed since the last read


class GuestStore:
    def __init__(
        self,
        cells: CellDatabases,
        *,
        dhcp_domain: str,
        capacity: int,
        poll_interval: float,
        fallback_interval: float | None = None,
        stats: StoreStats = NO_STATS,
    ) -> None:
        """``fallback_interval``: seconds between reads while every cell pushes (PostgreSQL,
        LISTEN connected); None: always poll every ``poll_interval``."""
        self.cells = cells
        self.dhcp_domain = dhcp_domain
        self.capacity = capacity
        self.poll_interval = poll_interval
        self.fallback_interval = fallback_interval
        self.stats = stats
        self._guests: OrderedDict[str, GuestDocuments] = OrderedDict()
        self._by_address: dict[str, str] = {}
        self._loading: dict[Key, asyncio.Future[GuestDocuments | None]] = {}
        self._queue: list[Key] = []
        self._loader: asyncio.Task[None] | None = None
        self._changes = 0  # changes applied so far
        self._changed_at: dict[str, int] = {}  # uuid -> self._changes when last changed
        self._feeds: dict[str, _Feed] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._unsubscribe: Callable[[], None] | None = None
        self._nap: asyncio.Future[None] | None = None  # the feed's wait for its next poll
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: dict[str, Listener] = {}  # cell name -> its LISTEN connection
        self._listening: set[str] = set()  # cells whose LISTEN connection is up
        self._told = False  # a NOTIFY (or a LISTEN connection's coming or going) since a read
        # Called with each changed uuid, after its documents are dropped (changes.py: the
        # long-polls waiting on it); None is "maybe everything" (the feed failed).
        self._watchers: list[Callable[[str | None], None]] = []
        self._heap = HeapFreezer()  # the cached guests kept out of full collections

    # -- lookups (the hot path: a dict hit, no IO) -------------------------------------------

    async def by_address(self, address: str) -> GuestDocuments | None:
        guest = self.cached_by_address(address)
        if guest is not None:
            self.stats.hit()
            return guest
        return await self._load(Key(BY_ADDRESS, address))

    async def by_uuid(self, uuid: str) -> GuestDocuments | None:
        guest = self.cached_by_uuid(uuid)
        if guest is not None:
            self.stats.hit()
            return guest
        return await self._load(Key(BY_UUID, uuid))

    def cached_by_address(self, address: str) -> GuestDocuments | None:
        """The guest at ``address`` if it is cached (None: not cached, which is not "no
        such guest"); never loads, and counts no hit: the caller does when it answers from
        it (a request the answer-at-once path leaves to the ASGI path is counted once)."""
        uuid = self._by_address.get(address)
        return None if uuid is None else self.cached_by_uuid(uuid)

    def cached_by_uuid(self, uuid: str) -> GuestDocuments | None:
        guest = self._guests.get(uuid)
        if guest is None or guest.facts.keys_refresh_at is None:
            return guest
        return self._at_now(guest)

    def _at_now(self, guest: GuestDocuments) -> GuestDocuments:
        """``guest`` without the keys that have expired since it was loaded (kept in its
        place: same instance, same addresses)."""
        current = guest.at(time.time())
        if current is not guest:
            self._guests[current.facts.uuid] = current
        return current

    def __len__(self) -> int:
        return len(self._guests)

    # -- loading -----------------------------------------------------------------------------

    async def _load(self, key: Key) -> GuestDocuments | None:
        """Queue ``key`` for the next batch (or join the load already under way for it)."""
        self.stats.missed()
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._loading[key] = pending
            self._queue.append(key)
            if self._loader is None or self._loader.done():
                self._loader = asyncio.create_task(self._load_queued())
        # Shielded: a request that goes away must not cancel the others' answer.
        return await asyncio.shield(pending)

    async def _load_queued(self) -> None:
        """Load queued keys in batches, one batch at a time: the misses that arrive while a
        batch is loading make up the next one, so batches grow with the storm."""
        while self._queue:
            keys, self._queue = self._queue[:BATCH_SIZE], self._queue[BATCH_SIZE:]
            started = self._changes
            try:
                found = await asyncio.to_thread(
                    load_guests, self.cells, keys, dhcp_domain=self.dhcp_domain
                )
            except BaseException as exc:
                for key in keys:
                    future = self._loading.pop(key)
                    future.set_exception(exc)
                    future.exception()  # retrieved: waiters get it, nobody logs "never retrieved"
                if not isinstance(exc, Exception):
                    raise
                continue
            for key in keys:
                guest = found.get(key)
                # A change read while this batch was loading may be newer than what it read.
                if guest is not None and self._changed_at.get(guest.facts.uuid, -1) < started:
                    self._remember(guest)
                self._loading.pop(key).set_result(guest)
            self.stats.cached(len(self._guests))
            self._heap.grown(len(self._guests))
            if not self._loading:
                self._changed_at.clear()

    def _remember(self, guest: GuestDocuments) -> None:
        uuid = guest.facts.uuid
        self._forget(uuid)
        self._guests[uuid] = guest
        for address in guest.facts.addresses:
            self._by_address[address] = uuid
        while len(self._guests) > self.capacity:
            self._forget(next(iter(self._guests)))

    def _forget(self, uuid: str) -> None:
        guest = self._guests.pop(uuid, None)
        if guest is not None:
            for address in guest.facts.addresses:
                if self._by_address.get(address) == uuid:
                    del self._by_address[address]

    # -- the change feed ---------------------------------------------------------------------

    def changed(self, uuid: str) -> None:
        """Drop ``uuid``'s documents (a change was read from the feed)."""
        self._changes += 1
        if self._loading:
            self._changed_at[uuid] = self._changes
        self._forget(uuid)
        self.stats.cached(len(self._guests))
        for watcher in self._watchers:
            watcher(uuid)

    def watch(self, watcher: Callable[[str | None], None]) -> None:
        """Call ``watcher(uuid)`` on this loop whenever an instance changed (``None``: any may
        have: the feed failed and every cached guest was dropped)."""
        self._watchers.append(watcher)

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._start_feeds)

        def heard(uuids: frozenset[str]) -> None:
            # Called in the thread that committed: queued on this loop before that thread's
            # caller resumes, so before the change's own answer (a DELETE's 204) is sent.
            with contextlib.suppress(RuntimeError):  # this loop is closed: nothing to drop
                loop.call_soon_threadsafe(self._changed_all, uuids)

        self._unsubscribe = self.cells.api_db.announcer.subscribe(GUEST_CHANGES, heard)
        self._task = asyncio.create_task(self._follow())

    def _changed_all(self, uuids: frozenset[str]) -> None:
        for uuid in uuids:
            self.changed(uuid)

    async def stop(self) -> None:
        # Not task.cancel(): a poll running in a thread would go on using a connection that
        # shutdown is about to close. The loop sees the flag after its current poll.
        self._stopping.set()
        _wake(self._nap)
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._task is not None:
            await self._task
        if self._loader is not None:
            await self._loader
        for listener in list(self._listeners.values()):
            await asyncio.to_thread(listener.stop)
        for feed in self._feeds.values():
            if feed.probe is not None:
                feed.probe.close()

    def _start_feeds(self) -> None:
        for cell in self.cells.all_cells():
            if cell.name not in self._feeds:
                # The probe's first look comes before the cursor's read: a commit between
                # the two is then read twice, never missed.
                probe = DataVersion.of(cell.engine)
                with cell.read() as session:
                    top = session.scalar(select(func.max(GuestChange.id))) or 0
                self._feeds[cell.name] = _Feed(cell=cell, cursor=top, probe=probe)
                if self.fallback_interval is not None and cell.engine.dialect.name == "postgresql":
                    self._listen(cell)

    # -- pushes (PostgreSQL) ---------------------------------------------------------------

    def _listen(self, cell: Database) -> None:
        def on_connection(up: bool, name: str = cell.name) -> None:
            self._call_soon(self._connection_changed, name, up)

        listener = Listener(
            cell.engine.url.render_as_string(hide_password=False),
            GUEST_CHANGES,
            lambda _payload: self._call_soon(self._tell),
            on_connection=on_connection,
        )
        self._listeners[cell.name] = listener
        listener.start()

    def _call_soon(self, function: Callable[..., None], *args: object) -> None:
        """Run ``function`` on the store's loop (from a listener's thread)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                self._loop.call_soon_threadsafe(function, *args)

    def _tell(self) -> None:
        """Read the feed soon: something changed, or may have unheard."""
        if not self._told:
            self._told = True
            _wake(self._nap)

    def _connection_changed(self, cell: str, up: bool) -> None:
        if up:
            self._listening.add(cell)
        else:
            self._listening.discard(cell)
        # Either way, read now: changes committed while the connection was down were not
        # announced, and a lost connection must end the long wait at once.
        self._tell()

    def _interval(self) -> float:
        """Seconds between reads when nobody tells the feed anything."""
        pushed = bool(self._feeds) and all(name in self._listening for name in self._feeds)
        if pushed and self.fallback_interval is not None:
            return self.fallback_interval
        return self.poll_interval

    async def _follow(self) -> None:
        last_prune = last_cells = time.monotonic()
        last_read = 0.0
        loop = asyncio.get_running_loop()
        while True:
            # What asyncio.sleep does (not wait_for(event): that costs a Task per poll, 50
            # times a second), with the future kept so that stop() and a NOTIFY need not wait
            # it out.
            self._nap = loop.create_future()
            if self._stopping.is_set():  # stop() came during the last poll or the nap
                return
            # Told: read at once, but not sooner than one poll interval after the last read.
            due = last_read + (self.poll_interval if self._told else self._interval())
            if (delay := due - time.monotonic()) > 0:
                wake = loop.call_later(delay, _wake, self._nap)
                try:
                    await self._nap
                finally:
                    wake.cancel()
                continue  # stopped, told (due sooner), or due: see again
            self._told = False  # a NOTIFY during the read below means one more read
            last_read = time.monotonic()
            try:
                now = last_read
                if now - last_cells > 10:
                    await asyncio.to_thread(self._start_feeds)  # cells added since
                    last_cells = now
                if not self._anything_new():
                    continue
                changed = await asyncio.to_thread(self.poll_once)
                for uuid in changed:
                    self.changed(uuid)
                if now - last_prune > PRUNE_EVERY:
                    await asyncio.to_thread(self._prune)
                    last_prune = now
            except Exception:
                # A database that is briefly away must not end the feed: drop everything,
                # since changes may be missed, and keep polling.
                log.exception("reading the change feed failed; dropping cached documents")
                self._guests.clear()
                self._by_address.clear()
                self.stats.cached(0)
                for watcher in self._watchers:
                    watcher(None)
                await asyncio.sleep(1)

    def _anything_new(self) -> bool:
        """False only when every cell is SQLite, with no gap watched, and none has had a
        commit since the last look: the read would find nothing (it runs in a thread, with a
        transaction and a query, 50 times a second per worker)."""
        new = False
        for feed in self._feeds.values():
            # Every probe is asked, so that each one's next answer starts from now.
            if feed.probe is None or feed.gaps or feed.probe.changed():
                new = True
        return new or not self._feeds

    def poll_once(self) -> list[str]:
        """Read new feed rows from every cell known (new cells are looked for every 10 s, not
        on every poll); return the changed instances."""
        changed: list[str] = []
        for feed in list(self._feeds.values()):
            rows = self._poll_cell(feed.cell, feed)
            if rows:
                now = utcnow()
                for _, stamped in rows:
                    self.stats.change_lag((now - stamped).total_seconds())
            changed += [uuid for uuid, _ in rows]
        return changed

    @staticmethod
    def _poll_cell(cell: Database, feed: _Feed) -> list[tuple[str, dt.datetime]]:
        now = time.monotonic()
        feed.gaps = {i: t for i, t in feed.gaps.items() if t > now}
        condition = GuestChange.id > feed.cursor
        if feed.gaps:
            condition = or_(condition, GuestChange.id.in_(list(feed.gaps)))
        with cell.read() as session:
            rows = session.execute(
                select(GuestChange.id, GuestChange.instance_uuid, GuestChange.changed_at)
                .where(condition)
                .order_by(GuestChange.id)
            ).all()
        for change_id, _, _ in rows:
            feed.gaps.pop(change_id, None)
            if change_id > feed.cursor:
                for missing in range(feed.cursor + 1, change_id):
                    feed.gaps[missing] = now + GAP_PATIENCE
                feed.cursor = change_id
        return [(uuid, changed_at) for _, uuid, changed_at in rows]

    def _prune(self) -> None:
        cutoff = utcnow() - FEED_RETENTION
        for feed in list(self._feeds.values()):
            feed.cell.run(partial(_prune_feed, cutoff=cutoff), write=True)


def _prune_feed(session: Session, *, cutoff: dt.datetime) -> None:
    # The newest row always stays: SQLite numbers new rows from the highest id
    # left, and an emptied table would restart below every worker's cursor.
    newest = session.scalar(select(func.max(GuestChange.id)))
    if newest is not None:
        session.execute(
            delete(GuestChange).where(GuestChange.changed_at < cutoff, GuestChange.id < newest)
        )
