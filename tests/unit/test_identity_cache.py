"""api/identity_cache.py: accepted tokens are answered from memory for no longer than
keystonemiddleware would keep them, never past the token's expiry, and within a bound."""

from __future__ import annotations

from typing import Any

import pytest

from cloudseed.api.identity_cache import IdentityCache, expiry_of, token_key
from cloudseed.web.context import RequestContext

ALICE = RequestContext(user_id="alice", project_id="p", roles=frozenset({"member"}), request_id="")
BOB = RequestContext(user_id="bob", project_id="p", roles=frozenset({"reader"}), request_id="")


class Clocks:
    def __init__(self) -> None:
        self.mono = 1000.0
        self.wall = 1_800_000_000.0

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


def cache(clocks: Clocks, *, ttl: float = 300, max_entries: int = 100) -> IdentityCache:
    return IdentityCache(
        ttl=ttl, max_entries=max_entries, clock=lambda: clocks.mono, wall_clock=lambda: clocks.wall
    )


def test_entry_lives_for_the_ttl(clocks: Clocks) -> None:
    c = cache(clocks, ttl=300)
    key = token_key(b"tok", None)
    c.put(key, ALICE, expires_at=clocks.wall + 3600)
    clocks.advance(299)
    assert c.get(key) == ALICE
    clocks.advance(1)
    assert c.get(key) is None
    assert len(c) == 0


def test_entry_never_outlives_the_token(clocks: Clocks) -> None:
    c = cache(clocks, ttl=300)
    key = token_key(b"tok", None)
    c.put(key, ALICE, expires_at=clocks.wall + 10)
    clocks.advance(9.5)
    assert c.get(key) == ALICE
    clocks.advance(0.5)
    assert c.get(key) is None


@pytest.mark.parametrize("expires_in", [None, 0, -5])
def test_expired_or_unknown_expiry_is_not_kept(clocks: Clocks, expires_in: float | None) -> None:
    c = cache(clocks)
    key = token_key(b"tok", None)
    c.put(key, ALICE, expires_at=None if expires_in is None else clocks.wall + expires_in)
    assert c.get(key) is None


def test_service_token_is_part_of_the_key() -> None:
    assert token_key(b"tok", None) != token_key(b"tok", b"svc")
    assert token_key(b"tok", b"svc") != token_key(b"tok", b"other")
    assert token_key(b"a", None) != token_key(b"b", None)


def test_least_recently_used_goes_first(clocks: Clocks) -> None:
    c = cache(clocks, max_entries=2)
    a, b, d = (token_key(t, None) for t in (b"a", b"b", b"d"))
    c.put(a, ALICE, expires_at=clocks.wall + 60)
    c.put(b, BOB, expires_at=clocks.wall + 60)
    assert c.get(a) == ALICE  # a is now the most recently used
    c.put(d, BOB, expires_at=clocks.wall + 60)
    assert len(c) == 2
    assert c.get(b) is None
    assert c.get(a) == ALICE and c.get(d) == BOB


@pytest.mark.parametrize(
    "options, ttl",
    [({}, 300), ({"token_cache_time": "60"}, 60), ({"token_cache_time": " 5 "}, 5)],
)
def test_ttl_is_keystonemiddlewares(options: dict[str, str], ttl: int) -> None:
    made = IdentityCache.from_options(options)
    assert made is not None and made.ttl == ttl


@pytest.mark.parametrize("value", ["-1", "0", "soon"])
def test_caching_off_when_keystonemiddleware_caches_nothing(value: str) -> None:
    assert IdentityCache.from_options({"token_cache_time": value}) is None


def test_expiry_of_identity_v3_token_info() -> None:
    info = {"token": {"expires_at": "2027-01-15T10:00:00.000000Z"}}
    assert expiry_of(info) == 1_800_007_200.0
    assert expiry_of({"token": {"expires_at": "2027-01-15T10:00:00"}}) == 1_800_007_200.0
    junk: Any
    for junk in (None, {}, {"token": {}}, {"token": {"expires_at": "later"}}, "x"):
        assert expiry_of(junk) is None
