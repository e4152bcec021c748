"""servers/live_keys/sets.py: what a 2.106 request may ask for, and the stored list it makes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys.sets import KeyRequest

NOW = dt.datetime(2030, 1, 1, 12, 0, 0)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("2030-01-02T00:00:00Z", "2030-01-02T00:00:00Z"),
        ("2030-01-02t00:00:00z", "2030-01-02T00:00:00Z"),
        ("2030-01-02T00:00", "2030-01-02T00:00:00Z"),  # no offset: UTC
        ("2030-01-02 00:00:00", "2030-01-02T00:00:00Z"),
        ("2030-01-02T02:00:00+02:00", "2030-01-02T00:00:00Z"),
        ("2030-01-01T08:00:00-0500", "2030-01-01T13:00:00Z"),
        ("2030-01-02T00:00:00.25Z", "2030-01-02T00:00:00.250000Z"),
    ],
)
def test_expiry_forms(value: str, stored: str) -> None:
    assert key_sets.parse_expiry(value, now=NOW) == stored


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("2030-01-02", "ISO 8601"),  # a date is not a time
        ("2030-W01-3T00:00:00", "ISO 8601"),
        ("\uff12\uff10\uff13\uff10-01-02T00:00:00", "ISO 8601"),  # full-width digits
        ("2030-01-02T00:00:00.1234567Z", "ISO 8601"),
        ("2030-01-02T00:00:00 UTC", "ISO 8601"),
        ("", "ISO 8601"),
        ("2030-02-30T00:00:00", "valid"),
        ("2030-01-02T24:00:00", "valid"),
        ("9999-12-31T23:00:00-14:00", "valid"),  # beyond the year 9999 in UTC
        ("2030-01-01T12:00:00Z", "past"),  # now is not the future
        ("2030-01-01T13:00:00+02:00", "past"),
        ("1999-01-01T00:00:00", "past"),
    ],
)
def test_expiry_refused(value: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason) as info:
        key_sets.parse_expiry(value, now=NOW)
    assert info.value.message.startswith("Invalid input for field/attribute expires_at.")


def test_a_long_value_is_shortened_in_the_message() -> None:
    with pytest.raises(InvalidInput) as info:
        key_sets.parse_expiry("x" * 5000, now=NOW)
    assert len(info.value.message) < 300


def test_key_requests() -> None:
    requests = key_sets.key_requests(
        ["a", {"name": "b", "expires_at": "2031-01-01T00:00:00Z"}, {"name": "c"}],
        now=NOW,
        limit=3,
    )
    assert requests == (
        KeyRequest(name="a"),
        KeyRequest(name="b", expires_at="2031-01-01T00:00:00Z"),
        KeyRequest(name="c"),
    )
    assert key_sets.key_requests([], now=NOW, limit=1) == ()
    with pytest.raises(InvalidInput, match="at most 2"):
        key_sets.key_requests(["a", "b", "c"], now=NOW, limit=2)
    with pytest.raises(InvalidInput, match="Duplicate key name: a"):
        key_sets.key_requests(["a", {"name": "a", "expires_at": None}], now=NOW, limit=5)


def test_project_key_requests() -> None:
    items: list[dict[str, Any]] = [
        {"name": "k", "user_id": "u1"},
        {"name": "k", "user_id": "u2", "expires_at": None},
    ]
    assert [
        (r.user_id, r.name) for r in key_sets.project_key_requests(items, now=NOW, limit=2)
    ] == [
        ("u1", "k"),
        ("u2", "k"),
    ]
    with pytest.raises(InvalidInput, match="Duplicate key pair"):
        key_sets.project_key_requests(items + items[:1], now=NOW, limit=5)
    with pytest.raises(InvalidInput, match="at most 1"):
        key_sets.project_key_requests(items, now=NOW, limit=1)


def entry(name: str, user: str = "alice", **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "user_id": user,
        "fingerprint": "aa",
        "fingerprint_sha256": f"SHA256:{user}:{name}",
        "public_key": f"ssh-ed25519 {user}-{name}",
        "type": "ssh",
        "created_at": "2030-01-01T00:00:00",
        "expires_at": None,
        "source": "server",
        "since_generation": 1,
        **fields,
    }


def test_merge_keeps_the_servers_keys_first_and_each_key_once() -> None:
    own = [entry("b"), entry("a")]
    project = [
        entry("a", source="project"),  # the same key pair
        entry("ops", "admin", source="project", fingerprint_sha256="SHA256:alice:b"),  # same key
        entry("ops2", "admin", source="project"),
    ]
    merged = key_sets.merge(own, project)
    assert [(e["user_id"], e["name"], e["source"]) for e in merged] == [
        ("alice", "b", "server"),
        ("alice", "a", "server"),
        ("admin", "ops2", "project"),
    ]


def test_with_generations_keeps_what_the_guest_already_has() -> None:
    old = [entry("a", since_generation=1), entry("b", since_generation=2, source="project")]
    new = [
        entry("a"),  # unchanged
        entry("b"),  # moved from the project to the server: the guest has it
        entry("c"),  # new
    ]
    assert [e["since_generation"] for e in key_sets.with_generations(old, new, 5)] == [1, 2, 5]
    later = [entry("a", expires_at="2031-01-01T00:00:00Z")]
    assert key_sets.with_generations(old, later, 6)[0]["since_generation"] == 6


def test_same_and_describe() -> None:
    legacy = {k: v for k, v in entry("a").items() if k not in ("source", "expires_at")}
    assert key_sets.same([legacy], [entry("a", since_generation=4)])
    assert not key_sets.same([entry("a")], [entry("a", source="project")])
    assert not key_sets.same([entry("a"), entry("b")], [entry("b"), entry("a")])
    assert key_sets.describe([entry("a", expires_at="2031-01-01T00:00:00Z")]) == [
        {
            "name": "a",
            "fingerprint_sha256": "SHA256:alice:a",
            "expires_at": "2031-01-01T00:00:00Z",
            "source": "server",
        }
    ]
    assert key_sets.first_key([]) == (None, None)
    assert key_sets.first_key([entry("a"), entry("b")]) == ("a", "ssh-ed25519 alice-a")


def test_an_unparsable_legacy_key_has_no_sha256_fingerprint() -> None:
    legacy = entry("a", fingerprint_sha256=None, public_key="not a key")
    assert key_sets.fingerprint_sha256(legacy) is None
