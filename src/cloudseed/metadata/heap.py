"""Keeping CPython's cyclic garbage collector off the cached guests.

A worker holding 10,000 guests tracks about 150,000 objects for the collector, and Python
3.11's full collection walks every one: in a storm worker each took 100-150 ms, every 2-3 s
under load (timed with gc.callbacks; docs/benchmarks.md), an event loop stalled that long
each time, and the paced pass's p99 was 45-52 ms. Cached guests are long-lived and hold no
reference cycles, so the walk finds nothing in them.

``HeapFreezer.grown(size)`` is told the cache's size after each load. When the cache reaches a
new high-water mark, a quarter above the last one (and at least ``first`` guests), it collects
the young generations and moves every tracked object to the permanent generation
(``gc.freeze``): later full collections walk only what was made since. A frozen object is still
freed when its last reference goes (reference counting does not look at generations); only a
cycle among objects frozen while alive is never collected. Freezing at high-water marks alone
keeps that bounded: about log1.25(capacity / first) + 1 freezes in a worker's life (22 for
the default 100,000 guests).

At the same marks the C heap gives back what loading the guests used and freed (glibc's
``malloc_trim``): a load's transient allocations are freed once the guests are built, but
glibc keeps the freed pages mapped in the middle of its heap, so a worker's RSS counted them
as if the guests held them (10,000 guests in 2 workers: 8.6-9.8 MiB per 1,000 guests without
the trim, 5.5-6.7 with it; docs/benchmarks.md, issue 36's notes). The trim walks the free blocks:
about 16 ms for 150 MB of live blocks interleaved with freed ones, at most once a freeze. Where
the C library has no ``malloc_trim`` (musl), nothing is given back.

Between the marks (a quarter of the cache), and after a storm's requests, what was freed stays
mapped too: ``settle_later`` trims once more when loading has been quiet for
``QUIET_SECONDS``, in a thread (a trim is a C call that lets go of the GIL), so a worker's RSS
settles at what its guests hold instead of where the last burst left the heap (the storm's
reading of memory per cached guest moved 4.3-6.4 KiB between runs of the same code).
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim(pad)``, or None where the process's C library has none."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


TRIM = _malloc_trim()
# How long loading must have stopped before the heap is trimmed again.
QUIET_SECONDS = 1.0


class HeapFreezer:
    GROWTH = 1.25

    def __init__(self, *, first: int = 1000, trim: Callable[[int], int] | None = TRIM) -> None:
        self._next = first
        self._trim = trim
        self.freezes = 0
        self.trims = 0  # settled trims done
        self._quiet: asyncio.TimerHandle | None = None

    def grown(self, size: int) -> None:
        if size < self._next:
            return
        gc.collect(1)  # the young generations' garbage first: cheap, and not frozen
        gc.freeze()
        if self._trim is not None:
            self._trim(0)
        self.freezes += 1
        self._next = max(self._next, int(size * self.GROWTH))

    def settle_later(self, loop: asyncio.AbstractEventLoop) -> None:
        """After a load: trim the heap once nothing more was loaded for QUIET_SECONDS."""
        if self._trim is None:
            return
        if self._quiet is not None:
            self._quiet.cancel()
        self._quiet = loop.call_later(QUIET_SECONDS, self._settle, loop)

    def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        self._quiet = None
        if self._trim is not None:
            loop.run_in_executor(None, self._trim, 0)
            self.trims += 1

    def stop(self) -> None:
        if self._quiet is not None:
            self._quiet.cancel()
            self._quiet = None
