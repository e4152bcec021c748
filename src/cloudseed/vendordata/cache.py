"""The answer cache in front of the dynamic targets: freshness, ETag revalidation, single
flight, stale-if-error and a back-off after failures, in one bounded LRU.

Nova calls every target on every request (its Cache-Control TODO was never done). Here a key
is (instance id, target name, SHA-256 of the request body), so any change of the instance's
data misses by itself and nothing has to be purged. For one key:

- a fresh stored answer (``max-age``) is served with no call at all;
- otherwise one call is made, and every concurrent request for the key waits for that same
  call (single flight): a boot storm calls a target once per instance, not once per request;
- the call carries ``If-None-Match`` when the stored answer had an ETag, and a 304 keeps the
  stored value;
- a failed call serves the stored value if there is one (stale-if-error, unless the target
  said ``must-revalidate``), else nothing, and for ``failure_backoff`` seconds the key is not
  called again: a dead target is not hammered by every guest's retries.

This module opens no sockets: the call itself is the ``fetch`` function a caller passes in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cloudseed.vendordata.cache_control import CachePolicy
from cloudseed.vendordata.errors import TargetFailure

log = logging.getLogger(__name__)

Key = tuple[str, str, bytes]  # instance id, target name, SHA-256 of the request body
Clock = Callable[[], float]
DEFAULT_MAX_ENTRIES = 100_000
DEFAULT_FAILURE_BACKOFF = 2.0  # seconds


@dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer: its compact JSON, what may be done with it, its ETag."""

    value: bytes
    policy: CachePolicy
    etag: str | None = None


@dataclass(frozen=True, slots=True)
class NotModified:
    """The target confirmed the stored answer (304 to our If-None-Match)."""

    policy: CachePolicy | None = None  # None: the 304 had no Cache-Control; keep the old one
    etag: str | None = None


# Called with the ETag of the stored answer to revalidate, or None for a plain call.
Fetch = Callable[[str | None], Awaitable[Answer | NotModified]]
# Called once per failed call: the key, the reason, and whether a stale answer is served.
FailureReport = Callable[[Key, str, bool], None]


@dataclass(frozen=True, slots=True)
class Outcome:
    value: bytes | None  # the answer to serve; None when there is none
    failure: str | None = None  # why the answer is missing or stale; None when all went well


class _Entry:
    # Slots and plain fields: with 100,000 entries every byte counts.
    __slots__ = (
        "etag",
        "failure",
        "fresh_until",
        "max_age",
        "retry_after",
        "stale_if_error",
        "value",
    )

    def __init__(
        self,
        value: bytes | None,
        *,
        etag: str | None = None,
        max_age: int = 0,
        stale_if_error: bool = True,
        fresh_until: float = 0.0,
    ) -> None:
        self.value = value
        self.etag = etag
        self.max_age = max_age
        self.stale_if_error = stale_if_error
        self.fresh_until = fresh_until
        self.retry_after = 0.0
        self.failure: str | None = None

    def stale_value(self) -> bytes | None:
        return self.value if self.stale_if_error else None


class AnswerCache:
    """One per Vendordata (so one per worker process); all methods run on its event loop."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        failure_backoff: float = DEFAULT_FAILURE_BACKOFF,
        clock: Clock = time.monotonic,
        on_failure: FailureReport | None = None,
    ) -> None:
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._flights: dict[Key, asyncio.Task[Outcome]] = {}
        self._max_entries = max_entries
        self._failure_backoff = failure_backoff
        self._clock = clock
        self._on_failure = on_failure

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: Key, fetch: Fetch) -> Outcome:
        """The answer for ``key``: stored and fresh, or from one (shared) call to ``fetch``."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            now = self._clock()
            if entry.value is not None and now < entry.fresh_until:
                return Outcome(entry.value)
            if now < entry.retry_after:
                return Outcome(entry.stale_value(), entry.failure)
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.create_task(self._refresh(key, entry, fetch))
            self._flights[key] = flight
        # Shielded: a guest that hangs up must not cancel the call the others wait for.
        return await asyncio.shield(flight)

    async def aclose(self) -> None:
        flights = list(self._flights.values())
        for flight in flights:
            flight.cancel()
        await asyncio.gather(*flights, return_exceptions=True)
        self._flights.clear()

    async def _refresh(self, key: Key, entry: _Entry | None, fetch: Fetch) -> Outcome:
        try:
            etag = entry.etag if entry is not None and entry.value is not None else None
            try:
                answer = await fetch(etag)
            except TargetFailure as failure:
                return self._failed(key, entry, failure.reason)
            except Exception as exc:
                # A bug in the call must cost this target's entry, not every guest's request.
                log.exception("vendordata call for %s/%s crashed", key[0], key[1])
                return self._failed(key, entry, f"internal error: {exc!r}")
            if isinstance(answer, Answer):
                return self._store(key, answer.value, answer.policy, answer.etag)
            if entry is None or entry.value is None or etag is None:
                return self._failed(
                    key, entry, "answered 304 Not Modified to a request without If-None-Match"
                )
            policy = answer.policy or CachePolicy(
                max_age=entry.max_age, stale_if_error=entry.stale_if_error
            )
            return self._store(key, entry.value, policy, answer.etag or entry.etag)
        finally:
            self._flights.pop(key, None)

    def _store(self, key: Key, value: bytes, policy: CachePolicy, etag: str | None) -> Outcome:
        if not policy.store:
            self._entries.pop(key, None)  # no-store also retires what an earlier answer left
            return Outcome(value)
        self._put(
            key,
            _Entry(
                value,
                etag=etag,
                max_age=policy.max_age,
                stale_if_error=policy.stale_if_error,
                fresh_until=self._clock() + policy.max_age,
            ),
        )
        return Outcome(value)

    def _failed(self, key: Key, entry: _Entry | None, reason: str) -> Outcome:
        if entry is None:
            entry = _Entry(None)  # remembers the failure, for the back-off
        entry.retry_after = self._clock() + self._failure_backoff
        entry.failure = reason
        self._put(key, entry)
        stale = entry.stale_value()
        if self._on_failure is not None:
            self._on_failure(key, reason, stale is not None)
        return Outcome(stale, reason)

    def _put(self, key: Key, entry: _Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
