"""The signing keys as stored (API database): read, create the first, rotate. Functions take a
``Session`` and never commit; time is handed in, so tests move it instead of sleeping.

Which key signs and which are published is decided from the stored keys and the time alone
(``KeySet``), so every process that read the same rows agrees:

- the **current** key (``current_slot = 1``) is the newest; rotation retires it and inserts another.
- a rotated-in key **signs** only once ``activation`` has passed since it was created (twice
  ``[identity] key_cache_seconds``), so every process has published it before any token
  carries its ``kid``; until then the key it replaced goes on signing.
- a retired key stays **published** until ``grace`` after its retirement, then is dropped
  from every published set; the next rotation deletes its row, private half and all.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from cloudseed.identity import signing_keys as keys
from cloudseed.identity.models import IdentityKey


@dataclass(frozen=True, slots=True)
class StoredKey:
    kid: str
    private_pem: str
    certificate_pem: str
    current: bool
    created_at: dt.datetime  # naive UTC, as stored
    retired_at: dt.datetime | None

    def published_until(self, grace: dt.timedelta) -> dt.datetime | None:
        return self.retired_at + grace if self.retired_at is not None else None


@dataclass(frozen=True, slots=True)
class KeySet:
    """The stored keys at one moment, and what follows from them at a given time."""

    keys: tuple[StoredKey, ...]  # newest first (stored_keys' order)
    grace: dt.timedelta
    activation: dt.timedelta

    def published(self, now: dt.datetime) -> list[StoredKey]:
        """The current key and the retired ones still in their grace period, newest first."""
        return [k for k in self.keys if k.retired_at is None or k.retired_at + self.grace > now]

    def signing(self, now: dt.datetime) -> StoredKey | None:
        """The key that signs at ``now``: the newest published key that is active (the
        current one, once ``activation`` has passed; until then the one it replaced). When
        none is yet (the very first key, or rotations faster than ``activation``), the oldest
        published one, which was signing already."""
        published = self.published(now)
        for key in published:
            if key.created_at + self.activation <= now:
                return key
        return published[-1] if published else None


def stored_keys(session: Session) -> list[StoredKey]:
    """Newest first: the current key, then the retired ones, the last retired first. By the
    order of rotations, not by creation times, which hosts' clocks write."""
    rows = sorted(session.scalars(select(IdentityKey)), key=_newest_first)
    return [
        StoredKey(
            kid=row.kid,
            private_pem=row.private_key,
            certificate_pem=row.certificate,
            current=row.current_slot is not None,
            created_at=row.created_at,
            retired_at=row.retired_at,
        )
        for row in rows
    ]


def _newest_first(row: IdentityKey) -> tuple[float, int]:
    retired = row.retired_at
    # The current key (never retired) first, then by retirement, the last one first.
    return (-(retired.replace(tzinfo=dt.UTC).timestamp() if retired else math.inf), -row.id)


def create_key(session: Session, *, now: dt.datetime, secret: str = "") -> str:
    """Insert a new current key; the caller has retired the previous one. Two transactions
    that both do this collide on the unique ``current_slot`` (IntegrityError at flush or commit):
    one wins."""
    new = keys.generate(now, secret=secret)
    session.add(
        IdentityKey(
            kid=new.kid,
            private_key=new.private_pem,
            certificate=new.certificate_pem,
            current_slot=1,
            created_at=now,
        )
    )
    session.flush()
    return new.kid


def ensure_key(session: Session, *, now: dt.datetime, secret: str = "") -> str | None:
    """Create the first key when there is no current one; its kid, or None when there was."""
    found = session.scalar(select(IdentityKey.kid).where(IdentityKey.current_slot.is_not(None)))
    if found is not None:
        return None
    return create_key(session, now=now, secret=secret)


@dataclass(frozen=True, slots=True)
class Rotation:
    new_kid: str
    retired_kid: str | None
    removed: tuple[str, ...]  # keys whose grace period had ended, deleted now


def rotate(
    session: Session, *, now: dt.datetime, grace: dt.timedelta, secret: str = ""
) -> Rotation:
    """Retire the current key, make a new one current, and delete the keys whose grace
    period has ended."""
    expired = session.scalars(
        select(IdentityKey.kid).where(
            IdentityKey.retired_at.is_not(None), IdentityKey.retired_at <= now - grace
        )
    ).all()
    if expired:
        session.execute(delete(IdentityKey).where(IdentityKey.kid.in_(expired)))
    retired = session.scalar(select(IdentityKey.kid).where(IdentityKey.current_slot.is_not(None)))
    if retired is not None:
        session.execute(
            update(IdentityKey)
            .where(IdentityKey.kid == retired, IdentityKey.current_slot.is_not(None))
            .values(current_slot=None, retired_at=now)
        )
    new_kid = create_key(session, now=now, secret=secret)
    return Rotation(new_kid=new_kid, retired_kid=retired, removed=tuple(sorted(expired)))
