"""Guests' documents held in memory, found by address or instance id, and dropped the moment
the instance changes, in every worker.

The store is the same for every kind of guest it holds: where guests come from and how their
changes are heard is its ``GuestSource``. cloudseed's own (``CellGuests``) loads them from the
cells (loading.py) and hears changes through the cells' change feed (feed.py: NOTIFY on
PostgreSQL, polling otherwise) and, at once, from the committing process's announcer
(``GUEST_CHANGES``); the Nova drop-in's (``nova_metadata/source.py``) reads Nova's databases.
A change read while the same instance is being loaded makes that load's result uncacheable,
so an old copy never outlives a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, Self, TypeVar

from cloudseed.cells.service import CellDatabases
from cloudseed.db.notify import GUEST_CHANGES
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.feed import ChangeFeed
from cloudseed.metadata.heap import HeapFreezer
from cloudseed.metadata.loading import BY_ADDRESS, BY_UUID, Key, load_guests
from cloudseed.metadata.stats import NO_STATS, StoreStats

BATCH_SIZE = 200  # guests loaded per thread hop at most


class Cached(Protocol):
    """What the store needs of a guest it holds."""

    @property
    def uuid(self) -> str: ...

    @property
    def addresses(self) -> tuple[str, ...]: ...

    @property
    def refresh_at(self) -> float | None:
        """When (POSIX time) ``at`` would give another object; None: never."""

    def at(self, now: float) -> Self: ...


G = TypeVar("G", bound=Cached)


class GuestSource(Protocol[G]):
    """Where a store's guests come from, and how it hears that one changed."""

    def load(self, keys: list[Key]) -> dict[Key, G | None]:
        """Every key's guest, or None where no live instance answers to it (runs in a
        worker thread)."""

    async def start(self, *, changed: Callable[[str], None], failed: Callable[[], None]) -> None:
        """Begin telling the store, on its loop, of each changed instance (``changed``) and
        of changes that may have been missed (``failed``)."""

    async def stop(self) -> None:
        """Tell nothing more (the store's loads may still be finishing)."""

    async def close(self) -> None:
        """After ``stop`` and the last load: release what ``start`` took."""


class CellGuests:
    """cloudseed's guests: loaded from its cells, changes heard from the cells' change feed
    and from this process's announcer."""

    def __init__(
        self,
        cells: CellDatabases,
        *,
        dhcp_domain: str,
        poll_interval: float,
        fallback_interval: float | None = None,
        stats: StoreStats = NO_STATS,
    ) -> None:
        """``poll_interval``, ``fallback_interval``: when the change feed is read (feed.py)."""
        self.cells = cells
        self.dhcp_domain = dhcp_domain
        self._poll_interval = poll_interval
        self._fallback_interval = fallback_interval
        self._stats = stats
        self._feed: ChangeFeed | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def load(self, keys: list[Key]) -> dict[Key, GuestDocuments | None]:
        return load_guests(self.cells, keys, dhcp_domain=self.dhcp_domain)

    async def start(self, *, changed: Callable[[str], None], failed: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self._feed = ChangeFeed(
            self.cells,
            changed=changed,
            failed=failed,
            poll_interval=self._poll_interval,
            fallback_interval=self._fallback_interval,
            stats=self._stats,
        )
        await self._feed.start()

        def heard(uuids: frozenset[str]) -> None:
            # Called in the thread that committed: queued on this loop before that thread's
            # caller resumes, so before the change's own answer (a DELETE's 204) is sent.
            with contextlib.suppress(RuntimeError):  # this loop is closed: nothing to drop
                loop.call_soon_threadsafe(_each, changed, uuids)

        self._unsubscribe = self.cells.api_db.announcer.subscribe(GUEST_CHANGES, heard)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._feed is not None:
            await self._feed.stop()

    async def close(self) -> None:
        if self._feed is not None:
            await self._feed.close()


def _each(changed: Callable[[str], None], uuids: frozenset[str]) -> None:
    for uuid in uuids:
        changed(uuid)


class GuestStore(Generic[G]):
    def __init__(
        self, source: GuestSource[G], *, capacity: int, stats: StoreStats = NO_STATS
    ) -> None:
        self.source = source
        self.capacity = capacity
        self.stats = stats
        self._guests: OrderedDict[str, G] = OrderedDict()
        self._by_address: dict[str, str] = {}
        self._loading: dict[Key, asyncio.Future[G | None]] = {}
        self._queue: list[Key] = []
        self._loader: asyncio.Task[None] | None = None
        self._changes = 0  # changes applied so far
        self._changed_at: dict[str, int] = {}  # uuid -> self._changes when last changed
        # Called with each changed uuid, after its documents are dropped (changes.py: the
        # long-polls waiting on it); None is "maybe everything" (the feed failed).
        self._watchers: list[Callable[[str | None], None]] = []
        self._heap = HeapFreezer()  # the cached guests kept out of full collections

    # -- lookups (the hot path: a dict hit, no IO) -------------------------------------------

    async def by_address(self, address: str) -> G | None:
        guest = self.cached_by_address(address)
        if guest is not None:
            self.stats.hit()
            return guest
        return await self._load(Key(BY_ADDRESS, address))

    async def by_uuid(self, uuid: str) -> G | None:
        guest = self.cached_by_uuid(uuid)
        if guest is not None:
            self.stats.hit()
            return guest
        return await self._load(Key(BY_UUID, uuid))

    def cached_by_address(self, address: str) -> G | None:
        """The guest at ``address`` if it is cached (None: not cached, which is not "no
        such guest"); never loads, and counts no hit: the caller does when it answers from
        it (a request the answer-at-once path leaves to the ASGI path is counted once)."""
        uuid = self._by_address.get(address)
        return None if uuid is None else self.cached_by_uuid(uuid)

    def cached_by_uuid(self, uuid: str) -> G | None:
        guest = self._guests.get(uuid)
        if guest is None or guest.refresh_at is None:
            return guest
        return self._at_now(guest)

    def _at_now(self, guest: G) -> G:
        """``guest`` without what has expired since it was loaded (kept in its place: same
        instance, same addresses)."""
        current = guest.at(time.time())
        if current is not guest:
            self._guests[current.uuid] = current
        return current

    def __len__(self) -> int:
        return len(self._guests)

    # -- loading -----------------------------------------------------------------------------

    async def _load(self, key: Key) -> G | None:
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
                found = await asyncio.to_thread(self.source.load, keys)
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
                if guest is not None and self._changed_at.get(guest.uuid, -1) < started:
                    self._remember(guest)
                self._loading.pop(key).set_result(guest)
            self.stats.cached(len(self._guests))
            self._heap.grown(len(self._guests))
            if not self._loading:
                self._changed_at.clear()

    def _remember(self, guest: G) -> None:
        uuid = guest.uuid
        self._forget(uuid)
        self._guests[uuid] = guest
        for address in guest.addresses:
            self._by_address[address] = uuid
        while len(self._guests) > self.capacity:
            self._forget(next(iter(self._guests)))

    def _forget(self, uuid: str) -> None:
        guest = self._guests.pop(uuid, None)
        if guest is not None:
            for address in guest.addresses:
                if self._by_address.get(address) == uuid:
                    del self._by_address[address]

    # -- changes -----------------------------------------------------------------------------

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
        await self.source.start(changed=self.changed, failed=self._forget_all)

    def _forget_all(self) -> None:
        """The feed failed: changes may have been missed, so nothing cached can be trusted."""
        self._guests.clear()
        self._by_address.clear()
        self.stats.cached(0)
        for watcher in self._watchers:
            watcher(None)

    async def stop(self) -> None:
        await self.source.stop()
        if self._loader is not None:
            await self._loader
        await self.source.close()
