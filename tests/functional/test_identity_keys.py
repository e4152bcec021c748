"""Identity signing keys in the API database, on every backend: the first key made once however
many processes race for it, rotation (and two at once), the grace period, encryption at rest,
and processes that agree on the signing key from the rows alone. Time is handed in."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading

import jwt
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database, is_deadlock
from cloudseed.identity import service
from cloudseed.identity import signing_keys as keys
from cloudseed.identity.errors import KeyUnreadable
from cloudseed.identity.keyring import Keyring
from cloudseed.settings import IdentitySection

pytestmark = pytest.mark.databases

GRACE = dt.timedelta(hours=24)
S = dt.timedelta(seconds=1)


def identity(**values: object) -> IdentitySection:
    return dataclasses.replace(IdentitySection(), **values)  # type: ignore[arg-type]


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def test_many_processes_make_one_first_key(clean_api_db: Database) -> None:
    # Each keyring stands for a worker process starting on an empty database.
    keyrings = [Keyring(clean_api_db, identity(key_cache_seconds=0)) for _ in range(6)]
    barrier = threading.Barrier(len(keyrings))
    results: list[str] = []

    def start(keyring: Keyring) -> None:
        barrier.wait()
        keyset = keyring.load()
        results.append(keyring.signer(keyset).kid)

    threads = [threading.Thread(target=start, args=(k,)) for k in keyrings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    with clean_api_db.read() as session:
        stored = service.stored_keys(session)
    assert [k.current for k in stored] == [True]
    assert results == [stored[0].kid] * len(keyrings)


def test_two_current_keys_cannot_be_stored(clean_api_db: Database) -> None:
    clean_api_db.run(lambda session: service.create_key(session, now=utcnow()), write=True)
    with pytest.raises(IntegrityError):
        clean_api_db.run(lambda session: service.create_key(session, now=utcnow()), write=True)


def test_rotation_retires_publishes_and_finally_deletes(clean_api_db: Database) -> None:
    t0 = utcnow().replace(microsecond=0) - dt.timedelta(days=10)

    first = clean_api_db.run(lambda session: service.create_key(session, now=t0), write=True)
    t1 = t0 + dt.timedelta(days=1)

    rotation = clean_api_db.run(
        lambda session: service.rotate(session, now=t1, grace=GRACE), write=True
    )
    assert (rotation.retired_kid, rotation.removed) == (first, ())
    with clean_api_db.read() as session:
        stored = service.stored_keys(session)
    assert [(k.kid, k.current, k.retired_at) for k in stored] == [
        (rotation.new_kid, True, None),
        (first, False, t1),
    ]
    keyset = service.KeySet(tuple(stored), GRACE, 20 * S)
    assert [k.kid for k in keyset.published(t1 + GRACE - S)] == [rotation.new_kid, first]
    assert [k.kid for k in keyset.published(t1 + GRACE)] == [rotation.new_kid]

    # The next rotation after the grace period deletes the old row, private key and all.
    third = clean_api_db.run(
        lambda session: service.rotate(session, now=t1 + GRACE, grace=GRACE), write=True
    )
    assert third.removed == (first,)
    with clean_api_db.read() as session:
        kids = [k.kid for k in service.stored_keys(session)]
    assert kids == [third.new_kid, rotation.new_kid]


def test_concurrent_rotations_make_one_new_key(clean_api_db: Database) -> None:
    clean_api_db.run(lambda session: service.create_key(session, now=utcnow()), write=True)
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def rotate() -> None:
        barrier.wait()
        try:
            clean_api_db.run(
                lambda session: service.rotate(session, now=utcnow(), grace=GRACE), write=True
            )
            outcomes.append("rotated")
        except IntegrityError:
            outcomes.append("conflict")
        except OperationalError as exc:
            # MariaDB may break the tie as a deadlock rather than a duplicate key: the
            # loser's transaction is rolled back whole all the same.
            if not is_deadlock(exc):
                raise
            outcomes.append("conflict")

    threads = [threading.Thread(target=rotate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    with clean_api_db.read() as session:
        stored = service.stored_keys(session)
    assert sum(k.current for k in stored) == 1
    # SQLite queues its writers (both rotate, one after the other); the others refuse one.
    assert outcomes.count("rotated") + outcomes.count("conflict") == 2
    assert len(stored) == 1 + outcomes.count("rotated")


def test_encrypted_at_rest_with_a_secret(clean_api_db: Database) -> None:
    sealed = Keyring(clean_api_db, identity(key_cache_seconds=0, key_encryption_secret="s3"))
    keyset = sealed.load()
    assert keys.is_encrypted(keyset.keys[0].private_pem)
    assert sealed.signer(keyset).private_key.key_size == 2048
    # Without the secret (or with another) the key cannot be used: 503, never a plain error.
    for secret in ("", "other"):
        keyring = Keyring(clean_api_db, identity(key_cache_seconds=0, key_encryption_secret=secret))
        with pytest.raises(KeyUnreadable):
            keyring.signer(keyring.load())


def test_plain_at_rest_without_a_secret(clean_api_db: Database) -> None:
    keyset = Keyring(clean_api_db, identity(key_cache_seconds=0)).load()
    assert keyset.keys[0].private_pem.startswith("-----BEGIN PRIVATE KEY-----")


def test_processes_agree_across_a_rotation_and_old_tokens_verify_through_the_grace(
    clean_api_db: Database,
) -> None:
    """Two processes (keyrings with their own caches) and a relying party that knows only
    the published keys: tokens of the old key verify until its grace ends, then not."""
    t0 = utcnow()
    clock = Clock(t0)
    settings = identity(key_cache_seconds=10, key_grace_seconds=86400)
    before = Keyring(clean_api_db, settings, clock=clock)
    old = before.signer(before.load())
    token = keys.encode_jwt({"sub": "i", "aud": "a"}, old.private_key, old.kid)

    new_kid = clean_api_db.run(
        lambda session: service.rotate(session, now=t0, grace=GRACE).new_kid, write=True
    )
    # Two processes that read the keys after the rotation (the cache is real time, the
    # clock the keys are judged by is the test's).
    workers = [Keyring(clean_api_db, settings, clock=clock) for _ in range(2)]

    def verifies(keyring: Keyring, at: dt.datetime) -> bool:
        clock.now = at
        jwks = jwt.PyJWKSet(
            [keys.jwk_entry(k.public_key, k.kid) for k in keyring.published(keyring.load())]
        )
        try:
            key = jwks[jwt.get_unverified_header(token)["kid"]]
        except KeyError:
            return False
        jwt.decode(token, key.key, algorithms=["RS256"], audience="a")
        return True

    def signing(at: dt.datetime) -> set[str]:
        clock.now = at
        return {w.signer(w.load()).kid for w in workers}

    assert signing(t0) == {old.kid}  # published everywhere, not yet signing
    assert signing(t0 + 20 * S) == {new_kid}  # twice key_cache_seconds later: everyone
    assert verifies(workers[0], t0 + GRACE - S)
    assert not verifies(workers[1], t0 + GRACE)


def test_keyring_cache_is_brief_and_shared_per_process(clean_api_db: Database) -> None:
    keyring = Keyring(clean_api_db, identity(key_cache_seconds=3600))
    first = keyring.load()
    assert keyring.cached() is first
    clean_api_db.run(lambda session: service.rotate(session, now=utcnow(), grace=GRACE), write=True)
    assert keyring.load() is first  # within key_cache_seconds: no read
    uncached = Keyring(clean_api_db, identity(key_cache_seconds=0))
    assert len(uncached.load().keys) == 2
