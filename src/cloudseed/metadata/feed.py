"""The cells' change feed as each metadata worker reads it: which instances changed, when to look.

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
sends its own NOTIFY). Rows older than ``FEED_RETENTION`` are pruned, the newest always kept.

A row may instead say that an instance's guest has just begun to boot (``boot``: a build,
rebuild, reboot or start finished; servers/records.py ``guests_booting``): that is no change,
and it is passed to ``ahead`` instead, so that the guest is loaded before its first request.
A worker that starts also passes on the boots of the last ``ahead_seconds`` (at most the
feed's retention): a worker restarted during a boot storm meets the storm warm.

The feed only reads: what a change means for the cached documents is its reader's business
(store.py's ``GuestStore``, which passes ``changed``, ``failed`` and ``ahead``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy import bindparam, delete, func, or_, select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.data_version import DataVersion
from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.db.notify import GUEST_CHANGES, Listener
from cloudseed.metadata.stats import NO_STATS, StoreStats
from cloudseed.servers.models import GuestChange

log = logging.getLogger(__name__)

GAP_PATIENCE = 10.0  # seconds a skipped change id is watched for
FEED_RETENTION = dt.timedelta(minutes=10)
PRUNE_EVERY = 60.0


def _wake(nap: asyncio.Future[None] | None) -> None:
    if nap is not None and not nap.done():
        nap.set_result(None)


@dataclass
class _Feed:
    cell: Database
    cursor: int
    gaps: dict[int, float] = field(default_factory=dict)  # id -> give up at
    probe: DataVersion | None = None  # SQLite: whether anything committed since the last read


class ChangeFeed:
    def __init__(
        self,
        cells: CellDatabases,
        *,
        changed: Callable[[str], None],
        failed: Callable[[], None],
        poll_interval: float,
        fallback_interval: float | None = None,
        ahead: Callable[[list[str]], None] | None = None,
        ahead_seconds: float = 0.0,
        stats: StoreStats = NO_STATS,
    ) -> None:
        """``changed(uuid)``: called on the loop for each change read; ``failed()``: a read
        failed, so changes may have been missed. ``fallback_interval``: seconds between reads
        while every cell pushes (PostgreSQL, LISTEN connected); None: always poll every
        ``poll_interval``. ``ahead(uuids)``: the guests that began to boot, in the order
        read (None: boots are not passed on); ``ahead_seconds``: how far back the first
        read looks for them."""
        self.cells = cells
        self.poll_interval = poll_interval
        self.fallback_interval = fallback_interval
        self.stats = stats
        self._changed = changed
        self._failed = failed
        self._ahead = ahead
        self._ahead_seconds = min(ahead_seconds, FEED_RETENTION.total_seconds()) if ahead else 0
        self._feeds: dict[str, _Feed] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._nap: asyncio.Future[None] | None = None  # the wait for the next poll
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: dict[str, Listener] = {}  # cell name -> its LISTEN connection
        self._listening: set[str] = set()  # cells whose LISTEN connection is up
        self._told = False  # a NOTIFY (or a LISTEN connection's coming or going) since a read

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        booted = await asyncio.to_thread(self._start_feeds)
        if booted and self._ahead is not None:
            self._ahead(booted)
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        # Not task.cancel(): a poll running in a thread would go on using a connection that
        # shutdown is about to close. The loop sees the flag after its current poll.
        self._stopping.set()
        _wake(self._nap)
        if self._task is not None:
            await self._task

    async def close(self) -> None:
        """After ``stop``: the LISTEN connections and the SQLite probes."""
        for listener in list(self._listeners.values()):
            await asyncio.to_thread(listener.stop)
        for feed in self._feeds.values():
            if feed.probe is not None:
                feed.probe.close()

    def _start_feeds(self) -> list[str]:
        """Follow the cells not followed yet, from their newest row on; return the guests
        that began to boot in them in the last ``ahead_seconds``, newest first."""
        booted: dict[str, None] = {}
        since = utcnow() - dt.timedelta(seconds=self._ahead_seconds)
        for cell in self.cells.all_cells():
            if cell.name not in self._feeds:
                # The probe's first look comes before the cursor's read: a commit between
                # the two is then read twice, never missed.
                probe = DataVersion.of(cell.engine)
                with cell.read() as session:
                    top = session.scalar(select(func.max(GuestChange.id))) or 0
                    if self._ahead_seconds > 0:
                        booted.update(dict.fromkeys(_boots_since(session, since, top)))
                self._feeds[cell.name] = _Feed(cell=cell, cursor=top, probe=probe)
                if self.fallback_interval is not None and cell.engine.dialect.name == "postgresql":
                    self._listen(cell)
        return list(booted)

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
        """Run ``function`` on the feed's loop (from a listener's thread)."""
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

    # -- reading -----------------------------------------------------------------------------

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
                booted: list[str] = []
                if now - last_cells > 10:
                    booted = await asyncio.to_thread(self._start_feeds)  # cells added since
                    last_cells = now
                new = self._anything_new()
                if new:
                    changed, booting = await asyncio.to_thread(self.poll_once)
                    for uuid in changed:
                        self._changed(uuid)
                    booted += booting
                if booted and self._ahead is not None:
                    self._ahead(booted)
                # Pruned only where something was written: an idle SQLite cell costs nothing.
                if new and now - last_prune > PRUNE_EVERY:
                    await asyncio.to_thread(self._prune)
                    last_prune = now
            except Exception:
                # A database that is briefly away must not end the feed: the reader drops
                # everything, since changes may be missed, and polling goes on.
                log.exception("reading the change feed failed; dropping cached documents")
                self._failed()
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

    def poll_once(self) -> tuple[list[str], list[str]]:
        """Read new feed rows from every cell known (new cells are looked for every 10 s, not
        on every poll); return the changed instances and those whose guests began to boot."""
        changed: list[str] = []
        booted: list[str] = []
        for feed in list(self._feeds.values()):
            rows = self._poll_cell(feed.cell, feed)
            if rows:
                now = utcnow()
                for _, stamped, _ in rows:
                    self.stats.change_lag((now - stamped).total_seconds())
            for uuid, _, boot in rows:
                (booted if boot else changed).append(uuid)
        return changed, booted

    @staticmethod
    def _poll_cell(cell: Database, feed: _Feed) -> list[tuple[str, dt.datetime, bool]]:
        now = time.monotonic()
        feed.gaps = {i: t for i, t in feed.gaps.items() if t > now}
        if feed.gaps:
            query, params = _NEWER_OR_LATE, {"cursor": feed.cursor, "gaps": padded(feed.gaps)}
        else:
            query, params = _NEWER, {"cursor": feed.cursor}
        # A Core read of a statement built once: every worker polls 50 times a second, and
        # during a storm of builds each poll finds rows.
        rows = cell.run(lambda connection: connection.execute(query, params).all(), core=True)
        for change_id, *_ in rows:
            feed.gaps.pop(change_id, None)
            if change_id > feed.cursor:
                for missing in range(feed.cursor + 1, change_id):
                    feed.gaps[missing] = now + GAP_PATIENCE
                feed.cursor = change_id
        return [(uuid, changed_at, bool(boot)) for _, uuid, changed_at, boot in rows]

    def _prune(self) -> None:
        cutoff = utcnow() - FEED_RETENTION
        for feed in list(self._feeds.values()):
            feed.cell.run(partial(_prune_feed, cutoff=cutoff), write=True)


_FEED_ROW = select(
    GuestChange.id, GuestChange.instance_uuid, GuestChange.changed_at, GuestChange.boot
).order_by(GuestChange.id)
_NEWER = _FEED_ROW.where(GuestChange.id > bindparam("cursor"))
_NEWER_OR_LATE = _FEED_ROW.where(
    or_(GuestChange.id > bindparam("cursor"), GuestChange.id.in_(bindparam("gaps", expanding=True)))
)


def _boots_since(session: Session, since: dt.datetime, top: int) -> list[str]:
    """The instances whose guests began to boot after ``since`` (up to row ``top``), the
    most recent first: those are the likeliest to ask first, and what does not fit in the
    cache is the oldest."""
    rows = session.execute(
        select(GuestChange.instance_uuid)
        .where(GuestChange.boot, GuestChange.changed_at > since, GuestChange.id <= top)
        .order_by(GuestChange.id.desc())
    ).scalars()
    return list(dict.fromkeys(rows))


def _prune_feed(session: Session, *, cutoff: dt.datetime) -> None:
    # The newest row always stays: SQLite numbers new rows from the highest id
    # left, and an emptied table would restart below every worker's cursor.
    newest = session.scalar(select(func.max(GuestChange.id)))
    if newest is not None:
        session.execute(
            delete(GuestChange).where(GuestChange.changed_at < cutoff, GuestChange.id < newest)
        )
