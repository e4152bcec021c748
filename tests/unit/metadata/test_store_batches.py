"""The guest store's batches (metadata/store.py): what is to be loaded ahead rides along
with the misses, up to AHEAD_BATCH_SIZE, so a storm of first requests does not starve it;
alone, it is gathered for AHEAD_GATHER_SECONDS into one batch."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Self

import pytest

from cloudseed.metadata import store
from cloudseed.metadata.loading import Key


@dataclass(frozen=True)
class Guest:
    uuid: str
    load: int = 1  # which of the source's loads made it
    # The threads its prepare() ran in (one whose uuid starts with "bad" fails to prepare).
    prepared: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def addresses(self) -> tuple[str, ...]:
        return ()

    @property
    def refresh_at(self) -> float | None:
        return None

    def at(self, now: float) -> Self:
        return self

    def prepare(self) -> None:
        if self.uuid.startswith("bad"):
            raise RuntimeError("a document that cannot be made")
        self.prepared.append(threading.current_thread().name)


class Source:
    """Guests for every uuid but "gone"; records each load (keys, ahead). The first load
    waits for ``release``, so that requests can queue behind it."""

    def __init__(self) -> None:
        self.loads: list[tuple[list[str], bool]] = []
        self.release = threading.Event()

    def load(self, keys: list[Key], *, ahead: bool = False) -> dict[Key, Guest | None]:
        if not self.loads:
            self.release.wait(10)
        self.loads.append(([k.value for k in keys], ahead))
        n = len(self.loads)
        return {k: None if k.value == "gone" else Guest(k.value, n) for k in keys}

    async def start(
        self,
        *,
        changed: Callable[[str], None],
        heard: Callable[[Iterable[str]], None],
        failed: Callable[[], None],
        ahead: Callable[[list[str]], None],
    ) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def close(self) -> None:
        pass


def test_misses_take_the_guests_to_load_ahead_along() -> None:
    async def scenario() -> tuple[Source, store.GuestStore[Guest]]:
        source = Source()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        first = asyncio.create_task(guests.by_uuid("first"))
        await asyncio.sleep(0.05)  # its load is under way, held by the source
        ahead = [f"a{n}" for n in range(store.AHEAD_BATCH_SIZE + 5)]
        guests.load_ahead(ahead)
        misses = [asyncio.create_task(guests.by_uuid(u)) for u in ("m1", "m2", "gone")]
        await asyncio.sleep(0)
        source.release.set()
        assert await first == Guest("first", 1)
        assert [g and g.uuid for g in await asyncio.gather(*misses)] == ["m1", "m2", None]
        while guests._loader is not None and not guests._loader.done():
            await asyncio.sleep(0.01)
        return source, guests

    source, guests = asyncio.run(scenario())
    room = store.AHEAD_BATCH_SIZE - 3
    assert source.loads == [
        (["first"], False),
        # The queued misses, then as much of what is to be loaded ahead as fills the batch.
        (["m1", "m2", "gone"], False),
        ([f"a{n}" for n in range(room)], True),
        # The rest on its own once no miss is queued.
        ([f"a{n}" for n in range(room, store.AHEAD_BATCH_SIZE + 5)], True),
    ]
    assert len(guests) == 1 + 2 + store.AHEAD_BATCH_SIZE + 5
    assert guests.cached_by_uuid("a0") == Guest("a0", 3)


def test_a_request_for_a_guest_loading_ahead_waits_for_that_load() -> None:
    async def scenario() -> tuple[Source, Guest | None]:
        source = Source()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        first = asyncio.create_task(guests.by_uuid("first"))
        await asyncio.sleep(0.05)
        guests.load_ahead(["a0"])
        miss = asyncio.create_task(guests.by_uuid("m1"))
        await asyncio.sleep(0)
        source.release.set()
        await first
        await miss
        return source, await guests.by_uuid("a0")

    source, guest = asyncio.run(scenario())
    assert guest == Guest("a0", 3)  # the misses' load, then those loaded ahead
    assert sum(1 for keys, _ in source.loads for k in keys if k == "a0") == 1


def test_a_request_after_a_change_never_gets_what_a_load_begun_before_it_read() -> None:
    """The API commits a change while a guest's load is under way; a request that comes
    after the change was heard joins that load, and gets the guest as a later load reads it."""

    async def scenario() -> tuple[Source, Guest | None, Guest | None, Guest | None]:
        source = Source()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        before = asyncio.create_task(guests.by_uuid("g"))
        await asyncio.sleep(0.05)  # the first load is under way, held by the source
        guests.changed("g")
        after = asyncio.create_task(guests.by_uuid("g"))
        await asyncio.sleep(0)
        source.release.set()
        return source, await before, await after, guests.cached_by_uuid("g")

    source, before, after, cached = asyncio.run(scenario())
    assert source.loads == [(["g"], False), (["g"], False)]
    assert before == after == cached == Guest("g", 2)


async def _until(done: Callable[[], bool]) -> None:
    while not done():
        await asyncio.sleep(0.01)


def test_guests_to_load_ahead_are_gathered_into_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build storm hands a few guests at every feed poll: those of one gathering window are
    loaded together, after the window, not one batch per poll."""
    # A window far longer than the polls below, so a loaded machine's late timers cannot
    # make the batch start early.
    monkeypatch.setattr(store, "AHEAD_GATHER_SECONDS", 1.0)

    async def scenario() -> tuple[Source, bool, bool]:
        source = Source()
        source.release.set()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        for poll in range(3):
            guests.load_ahead([f"p{poll}a", f"p{poll}b"])
            await asyncio.sleep(0.01)
        loaded_early = bool(source.loads)
        # The batch, once the window is over.
        await asyncio.wait_for(_until(lambda: guests.cached_by_uuid("p2b") is not None), 10)
        return source, loaded_early, guests.cached_by_uuid("p0a") is not None

    source, early, first_cached = asyncio.run(scenario())
    assert not early  # nothing loaded within the window
    assert source.loads == [(["p0a", "p0b", "p1a", "p1b", "p2a", "p2b"], True)]
    assert first_cached


def test_a_miss_does_not_wait_for_the_gathering(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "AHEAD_GATHER_SECONDS", 30.0)

    async def scenario() -> Source:
        source = Source()
        source.release.set()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        guests.load_ahead(["a0"])
        # Long before the window ends (the test would time out waiting for it).
        assert await asyncio.wait_for(guests.by_uuid("m0"), timeout=10) == Guest("m0", 1)
        while guests._loader is not None and not guests._loader.done():
            await asyncio.sleep(0.01)
        return source

    source = asyncio.run(scenario())
    assert source.loads == [(["m0"], False), (["a0"], True)]  # the ahead one rides along


def test_guests_loaded_ahead_are_prepared_in_the_loading_thread_misses_are_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> tuple[Guest | None, Guest | None, Guest | None]:
        source = Source()
        source.release.set()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        guests.load_ahead(["a0", "bad0"])
        miss = await asyncio.wait_for(guests.by_uuid("m0"), timeout=10)  # they ride along
        await asyncio.wait_for(_until(lambda: len(guests) == 3), 10)
        return miss, guests.cached_by_uuid("a0"), guests.cached_by_uuid("bad0")

    miss, ahead, bad = asyncio.run(scenario())
    assert miss is not None and miss.prepared == []  # asked for: answered as soon as loaded
    assert ahead is not None and len(ahead.prepared) == 1
    assert ahead.prepared[0] != threading.main_thread().name
    # A guest whose documents cannot be made ahead is kept: they are made (and fail) at its
    # requests, as without loading ahead.
    assert bad is not None and bad.prepared == []
    assert "rendering the documents of bad0 ahead failed" in caplog.text


def test_a_change_heard_from_another_thread_is_applied_before_the_next_lookup() -> None:
    """A commit's announcement comes in the committing thread, and its own answer goes out
    right after: a lookup that follows must not find the guest as it was, even before the
    loop has run the callback queued for the change (uvloop runs socket reads first)."""

    async def scenario() -> tuple[Guest | None, Guest | None, list[str | None]]:
        source = Source()
        source.release.set()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        await guests.start()
        told: list[str | None] = []
        guests.watch(told.append)
        await guests.by_uuid("renamed")
        await guests.by_uuid("other")
        committing = threading.Thread(target=guests.heard, args=(frozenset({"renamed"}),))
        committing.start()
        committing.join()
        # No await since: the loop has not run the queued callback.
        found = guests.cached_by_uuid("renamed"), guests.cached_by_uuid("other")
        await asyncio.sleep(0)  # the callback queued before it runs: nothing left to apply
        await guests.stop()
        return found[0], found[1], told

    renamed, other, told = asyncio.run(scenario())
    assert renamed is None  # dropped: its next request loads it afresh
    assert other == Guest("other", 2)
    assert told == ["renamed"]  # watchers (long-polls) told once


def test_guests_wait_to_be_loaded_ahead_while_the_worker_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While lookups come faster than BUSY_LOOKUPS_PER_SECOND, nothing is loaded ahead, not
    even along with a miss; a guest that asks meanwhile loads in its own batch; once the
    lookups stop, the rest load at the next check."""
    monkeypatch.setattr(store, "AHEAD_GATHER_SECONDS", 0.05)
    monkeypatch.setattr(store, "BUSY_LOOKUPS_PER_SECOND", 100)

    async def scenario() -> tuple[Source, list[tuple[list[str], bool]], Guest | None]:
        source = Source()
        source.release.set()
        guests: store.GuestStore[Guest] = store.GuestStore(source, capacity=1000)
        await guests.by_uuid("warm")  # a cached guest, asked for again and again below
        guests.load_ahead(["a0", "a1", "asks"])
        # Busy: 100 lookups every 10 ms (10,000 a second; a stalled machine still makes over
        # 100) for well over a few checks.
        for tick in range(40):
            for _ in range(100):
                guests.cached_by_uuid("warm")
            if tick == 20:
                # A miss while busy: its batch takes nothing along, and a guest waiting to be
                # loaded ahead that asks is loaded for its request.
                await asyncio.wait_for(guests.by_uuid("m0"), 10)
                assert await asyncio.wait_for(guests.by_uuid("asks"), 10) is not None
            await asyncio.sleep(0.01)
        while_busy = list(source.loads)
        # Quiet: the next check finds it so (waited for by the store's size: a lookup would
        # count as the work it waits out).
        await asyncio.wait_for(_until(lambda: len(guests) == 5), 10)
        return source, while_busy, guests.cached_by_uuid("a0")

    source, while_busy, a0 = asyncio.run(scenario())
    assert while_busy == [(["warm"], False), (["m0"], False), (["asks"], False)]
    assert source.loads[3:] == [(["a0", "a1"], True)]  # "asks" was cached: not loaded again
    assert a0 == Guest("a0", 4)
