"""AnswerCache with a hand-driven clock and scripted calls (its ``fetch`` seam): freshness,
ETag revalidation, single flight, no-store, stale-if-error, back-off, LRU bound."""

from __future__ import annotations

import asyncio

import pytest

from cloudseed.vendordata.cache import (
    Answer,
    AnswerCache,
    Key,
    NotModified,
    Outcome,
)
from cloudseed.vendordata.cache_control import CachePolicy
from cloudseed.vendordata.errors import TargetFailure

pytestmark = pytest.mark.anyio

KEY: Key = ("inst-1", "target", b"\x00" * 32)
FOREVER = CachePolicy(max_age=3600)
REVALIDATE = CachePolicy(max_age=0)
NO_STORE = CachePolicy(store=False, max_age=0, stale_if_error=False)
MUST_REVALIDATE = CachePolicy(max_age=10, stale_if_error=False)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Result = Answer | NotModified | TargetFailure | Exception


class Script:
    """A target as a list of results, one per call; records the ETag each call carried."""

    def __init__(self, *results: Result) -> None:
        self.results = list(results)
        self.etags: list[str | None] = []
        self.gate: asyncio.Event | None = None  # when set, calls wait for it

    async def __call__(self, etag: str | None) -> Answer | NotModified:
        self.etags.append(etag)
        if self.gate is not None:
            await self.gate.wait()
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    @property
    def calls(self) -> int:
        return len(self.etags)


def make_cache(clock: Clock, **options: object) -> tuple[AnswerCache, list[tuple[str, bool]]]:
    failures: list[tuple[str, bool]] = []

    def report(key: Key, reason: str, stale: bool) -> None:
        assert key == KEY or key[0] != KEY[0]
        failures.append((reason, stale))

    return AnswerCache(clock=clock, on_failure=report, **options), failures  # type: ignore[arg-type]


async def settle() -> None:
    """Let every ready task run until each waits on something."""
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture()
def clock() -> Clock:
    return Clock()


async def test_fresh_answer_is_served_without_a_call(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(Answer(b"1", CachePolicy(max_age=30)), Answer(b"2", FOREVER))
    assert await cache.get(KEY, script) == Outcome(b"1")
    clock.now += 29.9
    assert await cache.get(KEY, script) == Outcome(b"1")
    assert script.calls == 1
    clock.now += 0.1
    assert await cache.get(KEY, script) == Outcome(b"2")
    assert script.etags == [None, None]  # no ETag was given


async def test_etag_revalidation_and_304(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(
        Answer(b"v1", CachePolicy(max_age=5), etag='"a"'),
        NotModified(policy=CachePolicy(max_age=60)),
        NotModified(),  # no Cache-Control: the stored max-age (60) stands
        NotModified(etag='"b"'),
        Answer(b"v2", REVALIDATE),
    )
    assert (await cache.get(KEY, script)).value == b"v1"
    clock.now += 5
    assert (await cache.get(KEY, script)).value == b"v1"
    assert script.etags == [None, '"a"']
    clock.now += 59  # fresh for 60 s from the 304
    await cache.get(KEY, script)
    assert script.calls == 2
    clock.now += 1
    assert (await cache.get(KEY, script)).value == b"v1"
    clock.now += 60
    assert (await cache.get(KEY, script)).value == b"v1"
    clock.now += 60
    assert (await cache.get(KEY, script)).value == b"v2"
    assert script.etags == [None, '"a"', '"a"', '"a"', '"b"']  # the 304's new ETag was kept


async def test_revalidate_each_time_without_etag(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(Answer(b"1", REVALIDATE), Answer(b"2", REVALIDATE))
    assert (await cache.get(KEY, script)).value == b"1"
    assert (await cache.get(KEY, script)).value == b"2"
    assert script.etags == [None, None]


async def test_304_to_an_unconditional_call_is_a_failure(clock: Clock) -> None:
    cache, failures = make_cache(clock)
    outcome = await cache.get(KEY, Script(NotModified()))
    assert outcome == Outcome(None, "answered 304 Not Modified to a request without If-None-Match")
    assert failures == [(outcome.failure, False)]


async def test_concurrent_requests_share_one_call(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(Answer(b"1", REVALIDATE), Answer(b"2", REVALIDATE))
    script.gate = asyncio.Event()
    waiters = [asyncio.ensure_future(cache.get(KEY, script)) for _ in range(50)]
    other = asyncio.ensure_future(cache.get(("inst-2", "target", KEY[2]), script))
    await settle()
    assert script.calls == 2  # one per key, not one per request
    script.gate.set()
    outcomes = await asyncio.gather(*waiters)
    assert {o.value for o in outcomes} == {b"1"}
    assert (await other).value == b"2"


async def test_a_cancelled_waiter_does_not_cancel_the_shared_call(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(Answer(b"1", FOREVER))
    script.gate = asyncio.Event()
    first = asyncio.ensure_future(cache.get(KEY, script))
    second = asyncio.ensure_future(cache.get(KEY, script))
    await settle()
    first.cancel()
    script.gate.set()
    assert (await second).value == b"1"
    assert first.cancelled()
    assert (await cache.get(KEY, script)).value == b"1"
    assert script.calls == 1


async def test_no_store_is_not_kept_and_retires_an_older_answer(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(
        Answer(b"1", REVALIDATE, etag='"e"'), Answer(b"2", NO_STORE), TargetFailure("down")
    )
    await cache.get(KEY, script)
    assert (await cache.get(KEY, script)).value == b"2"
    # Nothing stored any more: no ETag sent, and no stale value for the failure.
    clock.now += 10
    assert await cache.get(KEY, script) == Outcome(None, "down")
    assert script.etags == [None, '"e"', None]


async def test_no_store_on_a_304_serves_once_and_forgets(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(
        Answer(b"1", REVALIDATE, etag='"e"'), NotModified(policy=NO_STORE), Answer(b"3", REVALIDATE)
    )
    await cache.get(KEY, script)
    assert (await cache.get(KEY, script)).value == b"1"
    assert (await cache.get(KEY, script)).value == b"3"
    assert script.etags == [None, '"e"', None]


async def test_stale_if_error_then_back_off(clock: Clock) -> None:
    cache, failures = make_cache(clock, failure_backoff=2.0)
    script = Script(
        Answer(b"good", REVALIDATE),
        TargetFailure("HTTP 500"),
        TargetFailure("HTTP 502"),
        Answer(b"better", REVALIDATE),
    )
    await cache.get(KEY, script)
    assert await cache.get(KEY, script) == Outcome(b"good", "HTTP 500")
    clock.now += 1.9  # backing off: served without a call
    assert await cache.get(KEY, script) == Outcome(b"good", "HTTP 500")
    assert script.calls == 2
    clock.now += 0.1
    assert await cache.get(KEY, script) == Outcome(b"good", "HTTP 502")
    clock.now += 2
    assert await cache.get(KEY, script) == Outcome(b"better")
    assert failures == [("HTTP 500", True), ("HTTP 502", True)]  # once per failed call


async def test_failure_without_a_stored_answer_backs_off_too(clock: Clock) -> None:
    cache, failures = make_cache(clock, failure_backoff=2.0)
    script = Script(TargetFailure("refused"), Answer(b"1", REVALIDATE))
    assert await cache.get(KEY, script) == Outcome(None, "refused")
    assert await cache.get(KEY, script) == Outcome(None, "refused")
    assert script.calls == 1
    clock.now += 2
    assert await cache.get(KEY, script) == Outcome(b"1")
    assert failures == [("refused", False)]


async def test_must_revalidate_forbids_stale_if_error(clock: Clock) -> None:
    cache, failures = make_cache(clock)
    script = Script(Answer(b"1", MUST_REVALIDATE, etag='"e"'), TargetFailure("down"), NotModified())
    await cache.get(KEY, script)
    clock.now += 10
    assert await cache.get(KEY, script) == Outcome(None, "down")
    assert failures == [("down", False)]
    # The stored answer is still there to be revalidated once the target is back.
    clock.now += 5
    assert await cache.get(KEY, script) == Outcome(b"1")
    assert script.etags == [None, '"e"', '"e"']


async def test_an_unexpected_error_is_contained(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    cache, failures = make_cache(clock)
    outcome = await cache.get(KEY, Script(RuntimeError("bug")))
    assert outcome == Outcome(None, "internal error: RuntimeError('bug')")
    assert failures == [(outcome.failure, False)]
    assert "crashed" in caplog.text


async def test_lru_bound(clock: Clock) -> None:
    cache, _ = make_cache(clock, max_entries=3)
    script = Script(*(Answer(str(n).encode(), FOREVER) for n in range(10)))
    keys: list[Key] = [(f"inst-{n}", "t", b"") for n in range(4)]
    for key in keys[:3]:
        await cache.get(key, script)
    await cache.get(keys[0], script)  # used: now the most recent
    await cache.get(keys[3], script)  # evicts keys[1], the least recently used
    assert len(cache) == 3
    assert script.calls == 4
    await cache.get(keys[0], script)
    await cache.get(keys[2], script)
    assert script.calls == 4
    assert (await cache.get(keys[1], script)).value == b"4"


async def test_aclose_cancels_calls_in_flight(clock: Clock) -> None:
    cache, _ = make_cache(clock)
    script = Script(Answer(b"1", FOREVER))
    script.gate = asyncio.Event()
    waiter = asyncio.ensure_future(cache.get(KEY, script))
    await settle()
    await cache.aclose()
    with pytest.raises(asyncio.CancelledError):
        await waiter
