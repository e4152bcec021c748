"""Answers replayed: a warm guest asking again exactly what it asked before gets the bytes of
the answer it was given, without the HTTP parser or the app (the listener's protocol,
``coalescing.py``, asks here first).

cloud-init asks the same few documents with the same head on every boot, and a guest's
documents change rarely: once answered, the same request is answered from bytes kept per
worker, keyed by who asked and exactly what was asked: the peer address the connection came
from and the whole request head, byte for byte (the proxy's signed headers, the forwarding
headers, If-None-Match and everything else in it). The caller's identity is a function of
those two alone (identify.py), so an entry can only answer the caller it was made for.

What may be kept is the app's to say (with its answer at once, how to make its ``Replayable``,
called only once the store has room for it: a boot storm's answers, each asked once, find the
store full and are refused without it): only answers
that are the same every time for as long as the guest does not change (no session token, no
time of day: the Date header is written fresh at each replay), but for a ``Hole`` of fixed
size made afresh at each replay (meta_data.json's random seed: every guest gets new bytes
there each time, as from the app). An entry is dropped when its guest changes or the feed
fails (the store's watchers), and checked at each replay with ``still_valid`` (the caller
is still that very guest object in the worker's cache: evicted, reloaded, changed or expired,
it is not). ``counted`` does at each replay what answering counts (the cache hit, the
token-less access audit, the metrics).

Memory is bounded: ``max_bytes`` per worker (1 MiB: a few hundred answers, some 40 guests'
whole crawls), each entry counted as its bytes and the Python objects around them, and an
answer larger than ``max_entry`` is not kept. A full store makes room only by dropping its
least recently replayed entries, and only those not replayed for ``idle_before_replaced``
seconds, or replayed fewer times than the new answer was asked for while it could not be kept,
less ``ASKED_MARGIN``; otherwise the new answer is not kept, and the refusal is counted. A boot
storm asks each guest's documents about once: its answers fill the store and are then only
looked up, where dropping the oldest for each new one wrote and dropped an entry per request,
held three times the counted memory and halved a 3,000-guest storm's warm throughput
(docs/benchmarks.md, the issue 36 notes). Without the count, the storm's answers, never
replayed, then kept out for 30 s a guest asking the same documents thousands of times a second
(the side-by-side's warm guest after its storm: half the throughput at 8 connections).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

# Who asked (the connection's peer address) and the whole request head, byte for byte.
ReplayKey = tuple[str | None, bytes]

DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_ENTRY = 64 * 1024
DEFAULT_IDLE_BEFORE_REPLACED = 30.0  # seconds
# A refused answer replaces an entry in use once asked for this many times more than that entry
# was replayed. With 1, guests crawled over and over in random order (a warm storm larger than
# the store) still traded entries on every pass: an entry not yet replayed in the current pass
# is one replay behind the answers asked again in it. With 2 they do not, and a guest asking
# the same few heads again and again is kept from its third ask.
ASKED_MARGIN = 2
# Refusals are counted by the key's hash for at most this many keys, and all forgotten at once
# past it (the counts' only ageing): a storm larger than the store refuses more keys than this
# a pass, so its counts never build up; a guest asked hot meanwhile builds up at once.
MAX_REFUSALS_COUNTED = 2048
# An entry's objects besides its bytes: the key's tuple, the entry, its Replayable with two
# closures and what they hold, the ordered dict's links, the guest's set; with what the
# allocator keeps around them, RSS grew about 2,400 bytes an entry (bench/metadata_storm.py,
# 10,000 guests: 3.4 times what 200 bytes of overhead counted).
_OVERHEAD = 2400


class Hole(NamedTuple):
    """Bytes of an answer made afresh at each replay (meta_data.json's random seed): as many
    as ``fill`` gives, always the same number, ending ``from_end`` bytes before its end."""

    from_end: int
    fill: Callable[[], bytes]


class Replayable(NamedTuple):
    """What the app says of an answer that may be replayed (made by ``AtOnce.replayable``)."""

    guest: str  # the instance's uuid: a change to it drops the entry
    still_valid: Callable[[], bool]  # the caller is still the guest the answer was made for
    counted: Callable[[], None]  # what answering it counts, done again at each replay
    hole: Hole | None = None  # in a whole answer (200, GET): bytes made afresh each time


# How an answer is replayed, made only once it is to be kept (None: it may not be after all).
MakeReplayable = Callable[[], Replayable | None]


def refilled(rest: bytes, hole: Hole) -> bytes:
    """``rest`` (the header lines, the blank line, the body) with ``hole`` filled afresh."""
    fresh = hole.fill()
    end = len(rest) - hole.from_end
    return b"".join((rest[: end - len(fresh)], fresh, rest[end:]))


class Replay:
    """A kept answer, and when it was last looked up."""

    __slots__ = ("hits", "replayable", "rest", "size", "status_line", "used_at")

    def __init__(
        self, status_line: bytes, rest: bytes, replayable: Replayable, size: int, used_at: float
    ) -> None:
        self.status_line = status_line
        self.rest = rest  # the header lines after the Date, the blank line, the body
        self.replayable = replayable
        self.size = size
        self.used_at = used_at
        self.hits = 0  # lookups that found it


class Replays:
    """One worker's replayable answers; the event loop's thread only (no locks)."""

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_entry: int = DEFAULT_MAX_ENTRY,
        idle_before_replaced: float = DEFAULT_IDLE_BEFORE_REPLACED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_entry = max_entry
        self.idle_before_replaced = idle_before_replaced
        self._clock = clock
        # Least recently looked up first. An OrderedDict: its oldest is found at once however
        # many entries moved to the end (a dict's first key is found by walking past the slots
        # its moved entries left: every keep of a full store walked them).
        self._entries: OrderedDict[ReplayKey, Replay] = OrderedDict()
        self._by_guest: dict[str, set[ReplayKey]] = {}
        self._bytes = 0
        # hash(key) -> how many times an answer to it was not kept (MAX_REFUSALS_COUNTED).
        self._refusals: dict[int, int] = {}

    def get(self, key: ReplayKey) -> Replay | None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.used_at = self._clock()
            entry.hits += 1
            self._entries.move_to_end(key)
        return entry

    def keep(self, key: ReplayKey, status_line: bytes, rest: bytes, make: MakeReplayable) -> None:
        """Keep the answer ``status_line`` + ``rest`` to ``key`` if there is room for it;
        ``make()`` is called only then."""
        size = len(key[1]) + len(status_line) + len(rest) + _OVERHEAD
        if size > self.max_entry:
            return
        if key in self._entries:
            self.forget(key)
        now = self._clock()
        digest = hash(key)
        victims = self._to_make_room(size, now, asked=self._refusals.get(digest, 0) + 1)
        if victims is None:
            self._refused(digest)
            return
        of = make()
        if of is None:
            return
        for victim in victims:
            self.forget(victim)
        self._refusals.pop(digest, None)
        self._entries[key] = Replay(status_line, rest, of, size, now)
        self._by_guest.setdefault(of.guest, set()).add(key)
        self._bytes += size

    def _to_make_room(self, size: int, now: float, asked: int) -> list[ReplayKey] | None:
        """The least recently replayed entries to drop for ``size`` more bytes, or None if
        one of them is still in use (replayed within ``idle_before_replaced`` seconds and at
        least ``asked - ASKED_MARGIN`` times)."""
        victims: list[ReplayKey] = []
        room = self.max_bytes - self._bytes
        entries = iter(self._entries.items())
        while room < size:
            victim, entry = next(entries, (None, None))
            if victim is None or entry is None:
                return None  # larger than the whole store
            in_use = now - entry.used_at < self.idle_before_replaced
            if in_use and asked <= entry.hits + ASKED_MARGIN:
                return None
            victims.append(victim)
            room += entry.size
        return victims

    def _refused(self, digest: int) -> None:
        """Count a refusal of the answer to the key whose hash is ``digest``."""
        refusals = self._refusals
        if len(refusals) >= MAX_REFUSALS_COUNTED:
            refusals.clear()
        refusals[digest] = refusals.get(digest, 0) + 1

    def forget(self, key: ReplayKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        self._bytes -= entry.size
        keys = self._by_guest.get(entry.replayable.guest)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_guest[entry.replayable.guest]

    def changed(self, uuid: str | None) -> None:
        """The store's watcher: ``uuid`` changed (None: any may have, the feed failed)."""
        if uuid is None:
            self._entries.clear()
            self._by_guest.clear()
            self._bytes = 0
            return
        for key in list(self._by_guest.get(uuid, ())):
            self.forget(key)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: ReplayKey) -> bool:  # not a lookup: nothing is moved or counted
        return key in self._entries
