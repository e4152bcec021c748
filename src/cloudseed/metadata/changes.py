"""Long-polls on metadata documents: GCE's ``wait_for_change``, on the OpenStack tree.

``GET /openstack/latest/meta_data.json?wait_for_change=true&last_etag=TAG&timeout_sec=N``
answers as soon as the document's ETag is not ``TAG`` (at once if it already is not; without
``last_etag``, at the first change after the request came), or after ``N`` seconds with the
current document. docs/change-notification.md is the guest's side.

Waiting costs no query: a waiter is a future in this worker's ``Waiters``, keyed by instance
uuid, set by the store's change feed (store.py ``watch``) when the instance changes: at once
for a change committed in this process, within a NOTIFY's round trip on PostgreSQL, within a
poll elsewhere. A woken waiter asks the store for its guest again (one batched load for all
the guests woken together) and answers if its document's tag moved, which every change of
the record does for the record's documents (etags.py); otherwise (a document tagged by its
bytes that did not change, or the feed failed and woke everyone) it waits on. Each waiter
holds one future and one task watching for the client going away (a disconnect releases its
place at once); the number waiting is capped per instance and per worker; ``drain``
(SIGTERM) answers every waiter with its current document.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import parse_qsl

from cloudseed.errors import InvalidInput
from cloudseed.metadata.errors import TooManyWaiters
from cloudseed.metadata.etags import opaque
from cloudseed.types import Receive
from cloudseed.web.validation import bounded_int, check_text

T = TypeVar("T")

MAX_TAG = 128  # characters of last_etag accepted (ours are under 40)
_BOOLEANS = {"true": True, "false": False}
_PARAMETERS = ("wait_for_change", "last_etag", "timeout_sec", "recursive")


@dataclass(frozen=True, slots=True)
class Query:
    """What a document request's query asks beyond the document."""

    wait: bool = False
    last_etag: bytes | None = None  # opaque (no quotes); None: the tag when the request came
    timeout: float = 0.0  # seconds
    recursive: bool = False


NO_QUERY = Query()


def parse_query(query: bytes, *, default_timeout: int, max_timeout: int) -> Query:
    """The long-poll parameters of ``query`` (others are ignored, as GCE does), or
    InvalidInput naming the one that is wrong."""
    if not query:
        return NO_QUERY
    try:
        pairs = parse_qsl(query.decode(), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidInput("The query string is not valid UTF-8.") from None
    values: dict[str, str] = {}
    for name, value in pairs:
        if name not in _PARAMETERS:
            continue
        if name in values:
            raise InvalidInput(f"{name} is given more than once.")
        values[name] = value
    if not values:
        return NO_QUERY
    check_text(values)
    wait = _boolean(values, "wait_for_change")
    recursive = _boolean(values, "recursive")
    timeout = default_timeout
    if "timeout_sec" in values:
        timeout = bounded_int(values["timeout_sec"], "timeout_sec", minimum=1, maximum=max_timeout)
    last: bytes | None = None
    if "last_etag" in values:
        text = values["last_etag"].strip()
        if not text or len(text) > MAX_TAG or not text.isascii() or not text.isprintable():
            raise InvalidInput(
                f"last_etag must be an ETag this service gave (1 to {MAX_TAG} printable "
                "ASCII characters)."
            )
        last = text.encode()
    if not wait and ("last_etag" in values or "timeout_sec" in values):
        raise InvalidInput("last_etag and timeout_sec need wait_for_change=true.")
    return Query(wait=wait, last_etag=last, timeout=float(timeout), recursive=recursive)


def _boolean(values: dict[str, str], name: str) -> bool:
    text = values.get(name)
    if text is None:
        return False
    try:
        return _BOOLEANS[text.lower()]
    except KeyError:
        raise InvalidInput(f"{name} must be true or false.") from None


class Waiter:
    """One waiting request: a future set when its instance changes (or the worker drains)."""

    __slots__ = ("future",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.future: asyncio.Future[None] = loop.create_future()

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class Waiters:
    """This worker's waiting requests by instance uuid."""

    def __init__(self, *, per_instance: int, total: int) -> None:
        self.per_instance = per_instance
        self.total = total
        self._by_uuid: dict[str, set[Waiter]] = {}
        self._count = 0
        self.draining = False
        self._counted: Callable[[int], None] = lambda _total: None

    def __len__(self) -> int:
        return self._count

    def count(self, uuid: str | None = None) -> int:
        """The requests waiting now: for instance ``uuid``, or (None) for every instance."""
        if uuid is None:
            return self._count
        return len(self._by_uuid.get(uuid, ()))

    def report(self, counted: Callable[[int], None]) -> None:
        """Call ``counted(total)`` whenever the number waiting changes (metrics/: a long-poll
        is rare beside plain requests, so one call per start and end costs nothing that
        shows)."""
        self._counted = counted

    def changed(self, uuid: str | None) -> None:
        """Wake the waiters of ``uuid`` (None: everyone's; the store's feed failed)."""
        if uuid is None:
            groups: list[set[Waiter]] = list(self._by_uuid.values())
        else:
            group = self._by_uuid.get(uuid)
            groups = [group] if group else []
        for waiters in groups:
            for waiter in waiters:
                waiter.wake()

    def drain(self) -> None:
        """The worker is stopping: every waiter answers now, new ones do not wait."""
        self.draining = True
        self.changed(None)

    @contextlib.contextmanager
    def waiting(self, uuid: str) -> Iterator[Waiter]:
        group = self._by_uuid.get(uuid)
        if group is not None and len(group) >= self.per_instance:
            raise TooManyWaiters(
                f"This instance already has {self.per_instance} requests waiting for a change."
            )
        if self._count >= self.total:
            raise TooManyWaiters("Too many requests are waiting for a change; try again later.")
        waiter = Waiter(asyncio.get_running_loop())
        if group is None:
            group = self._by_uuid[uuid] = set()
        group.add(waiter)
        self._count += 1
        self._counted(self._count)
        try:
            yield waiter
        finally:
            self._count -= 1
            group.discard(waiter)
            if not group:
                self._by_uuid.pop(uuid, None)
            self._counted(self._count)


async def _disconnected(receive: Receive) -> None:
    """Return when the client has gone away (the request's body, if any, is read and left)."""
    while (await receive())["type"] != "http.disconnect":
        pass


# How long a long-poll waits for a key's expiry that its clock says has passed while the
# document still served the key (time.time() read twice): then it renders it again.
EXPIRY_RECHECK = 0.005


class Watch:
    """The client's side of one long-poll: whether it has gone, and the wait for a wake-up."""

    def __init__(self, receive: Receive, deadline: float) -> None:
        self.deadline = deadline
        self._gone = asyncio.ensure_future(_disconnected(receive))

    async def next(self, waiter: Waiter, expiry: float | None = None) -> bool:
        """Wait for ``waiter`` to be woken, or for POSIX time ``expiry`` (a key the document
        serves expires then: it changes with no change of the record); False when the time
        ran out or the client went.

        Woken for an expiry, it says True even if the clock the documents are rendered by
        (time.time()) has not reached it yet, and the next call waits for the rest: a timer
        may fire early (uvloop reads its clock once a loop turn, so a busy turn makes every
        timer armed in it early). An expiry already passed is waited for EXPIRY_RECHECK more,
        never the whole long-poll: before, a key that expired between the caller's rendering
        and this call left the wait to the deadline (seen in CI under load, on uvloop)."""
        remaining = self.deadline - time.monotonic()
        for_expiry = (
            expiry is not None and remaining > 0 and (until := expiry - time.time()) < remaining
        )
        timeout = max(until, EXPIRY_RECHECK) if for_expiry else remaining
        if timeout > 0 and not self._gone.done() and not waiter.future.done():
            # asyncio.wait adds callbacks to both futures: no task per wake-up.
            await asyncio.wait(
                (waiter.future, self._gone), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        if waiter.future.done():
            waiter.future = asyncio.get_running_loop().create_future()
            return not self._gone.done()
        return for_expiry and not self._gone.done()

    def close(self) -> None:
        self._gone.cancel()


async def long_poll(
    waiters: Waiters,
    uuid: str,
    query: Query,
    receive: Receive,
    *,
    current: Callable[[], Awaitable[T]],
    tag_of: Callable[[T], bytes],
    expiry: Callable[[], float | None] = lambda: None,
) -> T:
    """``current()`` (the caller identified again and its document rendered; cheap while the
    guest is cached) once its tag differs from ``query.last_etag``, or when the wait ends."""
    found = await current()
    now = opaque(tag_of(found))
    wanted = now if query.last_etag is None else opaque(query.last_etag)
    if now != wanted or waiters.draining:
        return found
    with waiters.waiting(uuid) as waiter:
        # Again, now that a change would wake the waiter: one that came between the first
        # look and the registration would otherwise go unheard.
        found = await current()
        if opaque(tag_of(found)) != wanted:
            return found
        watch = Watch(receive, time.monotonic() + query.timeout)
        try:
            while await watch.next(waiter, expiry()) and not waiters.draining:
                found = await current()
                if opaque(tag_of(found)) != wanted:
                    return found
        finally:
            watch.close()
    # Timed out, drained, or the client went away: the document as it is (nothing changed
    # since it was last rendered, or a waiter would have been woken).
    return found
