"""Long-poll parameters are parsed strictly (400s with a message, never a 500), and waiters
are counted, capped and released."""

from __future__ import annotations

import asyncio
import time

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.metadata import changes
from cloudseed.metadata.errors import TooManyWaiters


def parse(query: bytes) -> changes.Query:
    return changes.parse_query(query, default_timeout=300, max_timeout=3600)


def test_parameters() -> None:
    assert parse(b"") is changes.NO_QUERY
    assert parse(b"other=1") is changes.NO_QUERY
    q = parse(b"wait_for_change=true&last_etag=%223-abc%22&timeout_sec=60")
    assert q == changes.Query(wait=True, last_etag=b'"3-abc"', timeout=60.0)
    assert parse(b"wait_for_change=TRUE").timeout == 300.0
    assert parse(b"wait_for_change=true&timeout_sec=3600").timeout == 3600.0
    assert parse(b"recursive=true").recursive


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (b"wait_for_change=yes", "wait_for_change must be true or false"),
        (b"wait_for_change=true&timeout_sec=0", "timeout_sec must be >= 1"),
        (b"wait_for_change=true&timeout_sec=3601", "timeout_sec must be <= 3600"),
        (b"wait_for_change=true&timeout_sec=-5", "timeout_sec must be >= 1"),
        (b"wait_for_change=true&timeout_sec=1.5", "timeout_sec must be an integer"),
        (b"wait_for_change=true&timeout_sec=" + b"9" * 5000, "timeout_sec must be <= 3600"),
        (b"wait_for_change=true&timeout_sec=%EF%BC%91", "timeout_sec must be an integer"),
        (b"wait_for_change=true&last_etag=", "last_etag must be"),
        (b"wait_for_change=true&last_etag=" + b"a" * 129, "last_etag must be"),
        (b"wait_for_change=true&last_etag=%C3%A9", "last_etag must be"),
        (b"wait_for_change=true&last_etag=%ED%A0%80", "not valid UTF-8"),
        (b"wait_for_change=true&last_etag=\xed\xa0\x80", "not valid UTF-8"),
        (b"wait_for_change=true&wait_for_change=true", "given more than once"),
        (b"timeout_sec=5", "need wait_for_change=true"),
        (b"recursive=1", "recursive must be true or false"),
    ],
)
def test_invalid_parameters(query: bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse(query)


def test_waiters_are_capped_and_released() -> None:
    async def main() -> None:
        waiters = changes.Waiters(per_instance=2, total=3)
        with waiters.waiting("a") as first, waiters.waiting("a"):
            with (
                pytest.raises(TooManyWaiters, match="This instance already has 2"),
                waiters.waiting("a"),
            ):
                pass
            with waiters.waiting("b"):
                assert len(waiters) == 3
                with pytest.raises(TooManyWaiters, match="Too many requests"), waiters.waiting("c"):
                    pass
            waiters.changed("b")
            assert not first.future.done()
            waiters.changed("a")
            assert first.future.done()
        assert len(waiters) == 0
        assert not waiters._by_uuid  # nothing left behind per instance
        with waiters.waiting("a") as w:
            waiters.drain()
            assert w.future.done() and waiters.draining

    asyncio.run(main())


def test_a_wait_for_an_expiry_never_outlasts_it() -> None:
    """A key that expired between the caller's rendering and the wait (or a timer that fired
    before time.time() reached the expiry) is waited for briefly and the document rendered
    again, never left to the long-poll's deadline."""

    async def main() -> list[tuple[bool, float]]:
        async def receive() -> dict[str, object]:
            await asyncio.sleep(3600)  # the client stays
            return {"type": "http.disconnect"}

        watch = changes.Watch(receive, time.monotonic() + 30)
        waiters = changes.Waiters(per_instance=2, total=3)
        results = []
        with waiters.waiting("a") as waiter:
            for ahead in (-1, 0.05):  # passed; soon (from now: the first wait takes time)
                started = time.monotonic()
                woken = await watch.next(waiter, time.time() + ahead)
                results.append((woken, time.monotonic() - started))
            # No expiry: a change wakes it.
            asyncio.get_running_loop().call_later(0.05, waiters.changed, "a")
            started = time.monotonic()
            results.append((await watch.next(waiter, None), time.monotonic() - started))
        watch.close()
        return results

    (passed, passed_s), (soon, soon_s), (changed, changed_s) = asyncio.run(main())
    assert passed and passed_s < 1  # before: the whole 30 s
    assert soon and 0.04 < soon_s < 1
    assert changed and changed_s < 1
