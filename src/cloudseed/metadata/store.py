"""Guests' documents held in memory, found by address or instance id, and dropped the moment
the instance changes, in every worker.

Changes reach every worker through the cells' change feed (feed.py: NOTIFY on PostgreSQL,
polling otherwise), and the committing process's own workers hear them at once from its
announcer (``GUEST_CHANGES``). A change read while the same instance is being loaded makes
that load's result uncacheable, so an old copy never outlives a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable

from cloudseed.cells.service import CellDatabases
from cloudseed.db.notify import GUEST_CHANGES
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.feed import ChangeFeed
from cloudseed.metadata.heap import HeapFreezer
from cloudseed.metadata.loading import BY_ADDRESS, BY_UUID, Key, load_guests
from cloudseed.metadata.stats import NO_STATS, StoreStats

BATCH_SIZE = 200  # guests loaded per thread hop at most


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
        """``poll_interval``, ``fallback_interval``: when the change feed is read (feed.py)."""
        self.cells = cells
        self.dhcp_domain = dhcp_domain
        self.capacity = capacity
        self.stats = stats
        self._guests: OrderedDict[str, GuestDocuments] = OrderedDict()
        self._by_address: dict[str, str] = {}
        self._loading: dict[Key, asyncio.Future[GuestDocuments | None]] = {}
        self._queue: list[Key] = []
        self._loader: asyncio.Task[None] | None = None
        self._changes = 0  # changes applied so far
        self._changed_at: dict[str, int] = {}  # uuid -> self._changes when last changed
        self._feed = ChangeFeed(
            cells,
            changed=self.changed,
            failed=self._forget_all,
            poll_interval=poll_interval,
            fallback_interval=fallback_interval,
            stats=stats,
        )
        self._unsubscribe: Callable[[], None] | None = None
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
        loop = asyncio.get_running_loop()
        await self._feed.start()

        def heard(uuids: frozenset[str]) -> None:
            # Called in the thread that committed: queued on this loop before that thread's
            # caller resumes, so before the change's own answer (a DELETE's 204) is sent.
            with contextlib.suppress(RuntimeError):  # this loop is closed: nothing to drop
                loop.call_soon_threadsafe(self._changed_all, uuids)

        self._unsubscribe = self.cells.api_db.announcer.subscribe(GUEST_CHANGES, heard)

    def _changed_all(self, uuids: frozenset[str]) -> None:
        for uuid in uuids:
            self.changed(uuid)

    def _forget_all(self) -> None:
        """The feed failed: changes may have been missed, so nothing cached can be trusted."""
        self._guests.clear()
        self._by_address.clear()
        self.stats.cached(0)
        for watcher in self._watchers:
            watcher(None)

    async def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        await self._feed.stop()
        if self._loader is not None:
            await self._loader
        await self._feed.close()
