"""metadata/heap.py: the cached guests moved out of the collector's full walks at the
cache's high-water marks only, and still freed when dropped."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from cloudseed.metadata import heap
from cloudseed.metadata.heap import HeapFreezer


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freezes_at_high_water_marks_a_quarter_apart() -> None:
    heap = HeapFreezer(first=1000)
    sizes = [10, 999, 1000, 1100, 1249, 1250, 1000, 1200, 1561, 1562, 5000, 5000, 6249, 6250]
    frozen_after = []
    for size in sizes:
        heap.grown(size)
        frozen_after.append(heap.freezes)
    #          10 999 1000 1100 1249 1250 1000 1200 1561 1562 5000 5000 6249 6250
    assert frozen_after == [0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 4, 4, 4, 5]
    assert gc.get_freeze_count() > 0


class Guest:
    """Slotted and tracked, as a cached guest's objects are."""

    __slots__ = ("__weakref__", "facts")

    def __init__(self) -> None:
        self.facts = [1, 2, 3]


def test_a_frozen_guest_is_freed_when_its_last_reference_goes() -> None:
    cache = {"a": Guest()}
    gone = weakref.ref(cache["a"])
    HeapFreezer(first=1).grown(1)
    assert gc.get_freeze_count() > 0
    del cache["a"]
    assert gone() is None  # reference counting, with no collection at all


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(heap.TRIM is None, reason="the C library has no malloc_trim (not glibc)")
def test_what_a_load_freed_leaves_the_workers_rss_at_a_freeze() -> None:
    # A load's rows and rendered bytes: C-heap allocations (over obmalloc's 512 bytes), freed
    # under a few that stay (the guests built from them), so glibc cannot shrink its heap top.
    loaded = [bytes(1000) + bytes([n % 256]) for n in range(50_000)]
    kept = [bytes(2000) for _ in range(100)]
    before = _rss_kib()
    del loaded
    after_free = _rss_kib()
    HeapFreezer(first=1).grown(1)
    after_freeze = _rss_kib()
    assert before - after_free < 10_000  # freed, yet still counted: ~50 MB
    assert after_free - after_freeze > 40_000, (before, after_free, after_freeze)
    assert kept


def test_the_heap_is_trimmed_once_loading_has_been_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "QUIET_SECONDS", 0.2)
    trimmed: list[int] = []

    def trim(pad: int) -> int:
        trimmed.append(pad)  # in the executor's thread
        return 1

    async def main() -> tuple[int, int]:
        freezer = HeapFreezer(first=10**9, trim=trim)
        loop = asyncio.get_running_loop()
        for _ in range(5):  # a burst of loads, the loop turning between them
            freezer.settle_later(loop)
            await asyncio.sleep(0)
        during = len(trimmed)
        deadline = time.monotonic() + 10
        while not trimmed and time.monotonic() < deadline:  # the quiet time, then the trim
            await asyncio.sleep(0.01)
        freezer.settle_later(loop)
        freezer.stop()  # a stopping store trims no more
        await asyncio.sleep(2 * heap.QUIET_SECONDS)
        return during, freezer.trims

    during, trims = asyncio.run(main())
    assert during == 0
    assert trimmed == [0] and trims == 1  # once, after the burst
