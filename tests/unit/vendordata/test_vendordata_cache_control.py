"""Cache-Control as a CachePolicy."""

from __future__ import annotations

import pytest

from cloudseed.vendordata.cache_control import MAX_DELTA_SECONDS, CachePolicy, parse_cache_control


@pytest.mark.parametrize(
    ("headers", "policy"),
    [
        ([], CachePolicy(store=True, max_age=0, stale_if_error=True)),
        (["max-age=60"], CachePolicy(max_age=60)),
        (["public, MAX-AGE=30"], CachePolicy(max_age=30)),
        (['max-age="45"'], CachePolicy(max_age=45)),
        (["max-age=0"], CachePolicy(max_age=0)),
        (["max-age=-5"], CachePolicy(max_age=0)),
        (["max-age=soon"], CachePolicy(max_age=0)),
        (["max-age"], CachePolicy(max_age=0)),
        (["no-cache"], CachePolicy(max_age=0)),
        (["max-age=60, no-cache"], CachePolicy(max_age=0)),
        (["no-store"], CachePolicy(store=False, max_age=0, stale_if_error=False)),
        (["max-age=60", "no-store"], CachePolicy(store=False, max_age=0, stale_if_error=False)),
        (["max-age=60, must-revalidate"], CachePolicy(max_age=60, stale_if_error=False)),
        (["max-age=10, max-age=99"], CachePolicy(max_age=10)),  # the first one counts
        (["max-age=99999999999999"], CachePolicy(max_age=MAX_DELTA_SECONDS)),
        (["private, s-maxage=5, stale-while-revalidate=9"], CachePolicy(max_age=0)),
    ],
)
def test_policy(headers: list[str], policy: CachePolicy) -> None:
    assert parse_cache_control(headers) == policy


def test_huge_and_non_ascii_max_age() -> None:
    """A target's max-age of more than 4,300 digits (int() refuses it) or of non-ASCII digits
    ("²" is a digit to str.isdigit, not to int) is no ValueError."""
    assert parse_cache_control(["max-age=" + "9" * 5000]).max_age == MAX_DELTA_SECONDS
    assert parse_cache_control(["max-age=\u00b2"]) == parse_cache_control(["max-age=x"])
