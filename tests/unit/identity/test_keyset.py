"""cloudseed.identity.service.KeySet: which key signs and which are published, at given
times (moved by the test, never slept)."""

from __future__ import annotations

import datetime as dt

from cloudseed.identity.service import KeySet, StoredKey

T0 = dt.datetime(2026, 1, 1)
GRACE = dt.timedelta(hours=24)
ACTIVATION = dt.timedelta(seconds=20)
S = dt.timedelta(seconds=1)


def key(kid: str, created: dt.datetime, retired: dt.datetime | None = None) -> StoredKey:
    return StoredKey(kid, "", "", retired is None, created, retired)


def keyset(*keys: StoredKey) -> KeySet:
    return KeySet(tuple(keys), GRACE, ACTIVATION)


def test_the_first_key_signs_at_once() -> None:
    only = keyset(key("a", T0))
    assert only.signing(T0).kid == "a"  # type: ignore[union-attr]
    assert [k.kid for k in only.published(T0)] == ["a"]


def test_a_rotated_in_key_is_published_at_once_and_signs_after_activation() -> None:
    rotated_at = T0 + dt.timedelta(days=3)
    keys = keyset(key("b", rotated_at), key("a", T0, retired=rotated_at))
    assert [k.kid for k in keys.published(rotated_at)] == ["b", "a"]
    assert keys.signing(rotated_at).kid == "a"  # type: ignore[union-attr]
    assert keys.signing(rotated_at + ACTIVATION - S).kid == "a"  # type: ignore[union-attr]
    assert keys.signing(rotated_at + ACTIVATION).kid == "b"  # type: ignore[union-attr]


def test_a_retired_key_is_dropped_when_its_grace_ends() -> None:
    rotated_at = T0 + dt.timedelta(days=3)
    keys = keyset(key("b", rotated_at), key("a", T0, retired=rotated_at))
    assert [k.kid for k in keys.published(rotated_at + GRACE - S)] == ["b", "a"]
    assert [k.kid for k in keys.published(rotated_at + GRACE)] == ["b"]


def test_rotations_faster_than_activation_keep_the_signing_key() -> None:
    keys = keyset(
        key("c", T0 + 10 * S), key("b", T0 + 5 * S, retired=T0 + 10 * S), key("a", T0, T0 + 5 * S)
    )
    assert keys.signing(T0 + 10 * S).kid == "a"  # type: ignore[union-attr]
    assert keys.signing(T0 + 5 * S + ACTIVATION).kid == "b"  # type: ignore[union-attr]
    assert keys.signing(T0 + 10 * S + ACTIVATION).kid == "c"  # type: ignore[union-attr]


def test_nothing_signs_without_keys() -> None:
    assert keyset().signing(T0) is None
