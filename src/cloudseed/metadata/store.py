"""Guests' documents held in memory, found by address or instance id, and dropped the moment
the instance changes, in every worker.

The store is the same for every kind of guest it holds: where guests come from and how their
changes are heard is its ``GuestSource``. cloudseed's own (cell_guests.py's ``CellGuests``)
loads them from the cells (loading.py) and hears changes through the cells' change feed
(feed.py: NOTIFY on PostgreSQL, polling otherwise) and, at once, from the committing process's
announcer (``GUEST_CHANGES``); the Nova drop-in's (``nova_metadata/guests.py``) reads Nova's
databases.
A change read while the same instance is being loaded makes that load's result uncacheable,
so an old copy never outlives a change, and sends the requests waiting for it to a load begun
after the change: a request that comes after the API committed a change sees it.

A source may also hand over instances whose guests are likely to ask soon (``ahead``: the
guests cloudseed's compute agent has just booted; the drop-in's instances that Nova is
building or has just changed, and the other guests of a host whose guests began to miss
together): the store loads them in small batches, alongside the misses or on their own, and
keeps them, so their first request is a hit. It does so only while the worker is quiet: a
loading thread slows every request the worker serves meanwhile, so beside a storm of requests
they wait (and each loads at its first request if it asks first). A guest loaded ahead is
also prepared in the loading thread (``Cached.prepare``: the documents cloud-init asks first,
rendered), so its first requests find them made instead of rendering them on the event loop
in the storm.
Loading ahead never evicts a cached guest: what finds the store full is left to its first
request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Generic

from cloudseed.metadata.guest_sources import Cached, G, GuestSource
from cloudseed.metadata.heap import HeapFreezer
from cloudseed.metadata.loading import BY_ADDRESS, BY_UUID, Key
from cloudseed.metadata.stats import NO_STATS, StoreStats

log = logging.getLogger(__name__)

BATCH_SIZE = 200  # guests loaded per thread hop at most
# Guests loaded ahead per thread hop: a request's load waits for at most one such batch.
AHEAD_BATCH_SIZE = 50
# How long guests to load ahead are gathered before a batch of their own starts (a miss starts
# one at once and takes them along). A build storm hands a few at every feed poll; a load of
# one guest cost about 4 times one of a batch of 50 (the transactions and statements are the
# same), while a guest's first request comes seconds after its boot began.
AHEAD_GATHER_SECONDS = 0.25
# Guests wait to be loaded ahead while the worker is busy: more than this many lookups a second
# since the last check (one every AHEAD_GATHER_SECONDS while some wait). On uvloop each socket
# callback takes the GIL on its own, so while the loading thread runs Python every one of them
# waits for it (bench/gil_convoy.py): loading ahead beside a storm of requests for other guests
# doubled that storm's p99 (docs/benchmarks.md, issue 36). A guest still waiting when it asks
# is loaded in its request's batch, as without loading ahead; the rest load once it is quiet.
BUSY_LOOKUPS_PER_SECOND = 1000


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
        self._ahead: dict[str, None] = {}  # uuids to load ahead, in order
        self._loading_ahead: set[Key] = set()  # the batch loading ahead now
        self._asked: set[Key] = set()  # those of it that a request waits for
        self._loader: asyncio.Task[None] | None = None
        self._ahead_check: asyncio.TimerHandle | None = None  # the next busy check, pending
        # Lookups so far, and when the last busy check was and how many there were then.
        self._lookups = 0
        self._checked = (0.0, 0)
        self._quiet = True  # the last busy check's finding (a new worker is quiet)
        self._changes = 0  # changes applied so far
        self._changed_at: dict[str, int] = {}  # uuid -> self._changes when last changed
        # Called with each changed uuid, after its documents are dropped (changes.py: the
        # long-polls waiting on it); None is "maybe everything" (the feed failed).
        self._watchers: list[Callable[[str | None], None]] = []
        self._heap = HeapFreezer()  # the cached guests kept out of full collections
        # Changes told from other threads (``heard``), not yet applied; only this loop's
        # thread takes from it.
        self._heard: deque[str] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None

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
        self._lookups += 1
        if self._heard:
            self._apply_heard()
        uuid = self._by_address.get(address)
        return None if uuid is None else self._cached(uuid)

    def cached_by_uuid(self, uuid: str) -> G | None:
        self._lookups += 1
        if self._heard:
            self._apply_heard()
        return self._cached(uuid)

    def _cached(self, uuid: str) -> G | None:
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
        if pending is not None:
            if key in self._loading_ahead:
                self._asked.add(key)
        else:
            pending = asyncio.get_running_loop().create_future()
            self._loading[key] = pending
            self._queue.append(key)
            self._start_loader()
        # Shielded: a request that goes away must not cancel the others' answer.
        return await asyncio.shield(pending)

    def load_ahead(self, uuids: Iterable[str]) -> None:
        """Load ``uuids`` once the worker is quiet, and keep them (at most ``capacity``
        queued; never evicting: see the module's docstring). They are gathered until the
        next busy check, or ride along with a miss's batch sooner while the worker is quiet."""
        for uuid in uuids:
            if len(self._ahead) >= self.capacity:
                break
            self._ahead[uuid] = None
        if self._ahead and self._ahead_check is None:
            self._checked = (time.monotonic(), self._lookups)
            self._ahead_check = asyncio.get_running_loop().call_later(
                AHEAD_GATHER_SECONDS, self._check_busy
            )

    def _check_busy(self) -> None:
        """Every AHEAD_GATHER_SECONDS while guests wait to be loaded ahead: whether the
        worker was quiet since the last check; if it was, they start loading."""
        self._ahead_check = None
        now, lookups = time.monotonic(), self._lookups
        since, before = self._checked
        self._checked = (now, lookups)
        self._quiet = lookups - before <= BUSY_LOOKUPS_PER_SECOND * (now - since)
        if self._quiet:
            self._start_loader()
        if self._ahead:
            self._ahead_check = asyncio.get_running_loop().call_later(
                AHEAD_GATHER_SECONDS, self._check_busy
            )

    def _start_loader(self) -> None:
        if self._loader is None or self._loader.done():
            self._loader = asyncio.create_task(self._load_queued())

    def _take_ahead(self, room: int) -> list[Key]:
        """At most ``room`` keys to load ahead: neither cached nor loading, while the store
        has room (the rest is dropped when it has none)."""
        keys: list[Key] = []
        while self._ahead and len(keys) < room:
            if len(self._guests) + len(keys) >= self.capacity:
                self._ahead.clear()
                break
            uuid = next(iter(self._ahead))
            del self._ahead[uuid]
            key = Key(BY_UUID, uuid)
            if uuid in self._guests or key in self._loading:
                continue
            # Registered as loading: a request for it meanwhile waits for this load.
            self._loading[key] = asyncio.get_running_loop().create_future()
            keys.append(key)
        return keys

    async def _load_queued(self) -> None:
        """Load queued keys in batches, one batch at a time: the misses that arrive while a
        batch is loading make up the next one, so batches grow with the storm. What is to be
        loaded ahead fills each batch up to ``AHEAD_BATCH_SIZE`` (a request waits for at most
        that many loads besides its own), and has batches of its own when no miss is queued:
        in a storm of first requests the guests loaded ahead are not starved by it. While the
        worker is busy (``_check_busy``), what is to be loaded ahead waits."""
        while self._queue or (self._ahead and self._quiet):
            keys, self._queue = self._queue[:BATCH_SIZE], self._queue[BATCH_SIZE:]
            extra = self._take_ahead(AHEAD_BATCH_SIZE - len(keys)) if self._quiet else []
            if not keys and not extra:
                continue
            self._loading_ahead = set(extra)
            started = self._changes
            try:
                found = await asyncio.to_thread(self._load_batch, keys, extra)
            except BaseException as exc:
                self._loading_ahead, self._asked = set(), set()
                for key in keys + extra:
                    future = self._loading.pop(key)
                    future.set_exception(exc)
                    future.exception()  # retrieved: waiters get it, nobody logs "never retrieved"
                if not isinstance(exc, Exception):
                    raise
                if extra:
                    self._ahead.clear()  # the source is failing: the rest load when asked
                continue
            for key in keys + extra:
                guest = found.get(key)
                ahead = key in self._loading_ahead
                if ahead and guest is None and key in self._asked:
                    # Loading ahead may leave out what it could load only by writing: "none"
                    # is not the answer to a request that joined; it waits for a load of its own.
                    self._queue.append(key)
                    continue
                # A change read while this batch was loading may be newer than what it read.
                changed = self._changed_since(key, guest, started)
                if changed and (not ahead or key in self._asked):
                    # A request that joined this load after the change must see it: the
                    # waiters wait for a load begun after the change.
                    self._queue.append(key)
                    continue
                if (
                    guest is not None
                    and not changed
                    and not (ahead and len(self._guests) >= self.capacity)
                ):
                    self._remember(guest)
                self._loading.pop(key).set_result(guest)
            self._loading_ahead, self._asked = set(), set()
            self.stats.cached(len(self._guests))
            self._heap.grown(len(self._guests))
            self._heap.settle_later(asyncio.get_running_loop())
            if not self._loading:
                self._changed_at.clear()

    def _changed_since(self, key: Key, guest: G | None, started: int) -> bool:
        """Whether the instance ``key`` names was heard changed after ``started``."""
        uuid = guest.uuid if guest is not None else key.value if key.kind == BY_UUID else None
        return uuid is not None and self._changed_at.get(uuid, -1) > started

    def _load_batch(self, keys: list[Key], extra: list[Key]) -> dict[Key, G | None]:
        """In the loading thread: the misses ``keys``, then ``extra`` loaded ahead."""
        found = self.source.load(keys) if keys else {}
        if extra:
            ahead = self.source.load(extra, ahead=True)
            for guest in ahead.values():
                if guest is not None:
                    _prepare(guest)
            found.update(ahead)
        return found

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

    def heard(self, uuids: Iterable[str]) -> None:
        """From any thread: ``uuids`` changed (a commit of this process, told in the thread
        that committed, before the change's own answer is sent). Applied at the next lookup
        or by the callback queued here, whichever comes first, so a request read after that
        answer never gets the guest as it was, whatever order the event loop runs its
        callbacks in: asyncio runs the ones queued from threads before the socket reads of
        the same turn, uvloop runs them after (a 304 for a renamed server, seen in CI)."""
        self._heard.extend(uuids)
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to drop
                loop.call_soon_threadsafe(self._apply_heard)

    def _apply_heard(self) -> None:
        heard = self._heard
        while heard:
            self.changed(heard.popleft())

    def watch(self, watcher: Callable[[str | None], None]) -> None:
        """Call ``watcher(uuid)`` on this loop whenever an instance changed (``None``: any may
        have: the feed failed and every cached guest was dropped)."""
        self._watchers.append(watcher)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.source.start(
            changed=self.changed, heard=self.heard, failed=self._forget_all, ahead=self.load_ahead
        )

    def _forget_all(self) -> None:
        """The feed failed: changes may have been missed, so nothing cached can be trusted."""
        self._guests.clear()
        self._by_address.clear()
        self.stats.cached(0)
        for watcher in self._watchers:
            watcher(None)

    async def stop(self) -> None:
        await self.source.stop()
        self._heap.stop()
        self._ahead.clear()
        if self._ahead_check is not None:
            self._ahead_check.cancel()
            self._ahead_check = None
        if self._loader is not None:
            await self._loader
        await self.source.close()


def _prepare(guest: Cached) -> None:
    """``guest.prepare()``; a document that cannot be made now is made (and fails) at its
    request, as it would have without this."""
    try:
        guest.prepare()
    except Exception:
        log.exception("rendering the documents of %s ahead failed", guest.uuid)
