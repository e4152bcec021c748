"""Key pair operations on an API database session. Routes and the CLI both call these; the
caller owns the transaction (``Database.write()``), so a failure anywhere leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import Select, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.keypairs import keys
from cloudseed.keypairs.errors import (
    KeypairExists,
    KeypairLimitExceeded,
    KeypairNotFound,
    MarkerNotFound,
)
from cloudseed.keypairs.models import KeyPair
from cloudseed.quotas import service as quotas

RESOURCE = "key_pairs"
_Query = TypeVar("_Query", bound=Select[*tuple[Any, ...]])
UNIQUE_INDEX = "uq_key_pairs_user_id_name"


@dataclass(frozen=True)
class Quota:
    """The caller's limit settings for key pairs: the default and whether to count again."""

    default: int
    recheck: bool
    project_id: str


def count(session: Session, user_id: str) -> int:
    return (
        session.scalar(select(func.count()).select_from(KeyPair).where(KeyPair.user_id == user_id))
        or 0
    )


def _limit(session: Session, user_id: str, quota: Quota) -> int:
    return quotas.limit_for(
        session,
        resource=RESOURCE,
        project_id=quota.project_id,
        user_id=user_id,
        default=quota.default,
    )


def _check_quota(session: Session, user_id: str, limit: int, *, adding: int) -> None:
    # Unlimited users skip the count, which is a scan of all their key pairs.
    if limit != quotas.UNLIMITED and not quotas.within(limit, count(session, user_id) + adding):
        raise KeypairLimitExceeded(limit=limit)


def _insert(
    session: Session,
    *,
    user_id: str,
    name: str,
    public_key: str,
    parsed: keys.ParsedKey,
    quota: Quota,
    limit: int | None = None,
) -> KeyPair:
    limit = _limit(session, user_id, quota) if limit is None else limit
    _check_quota(session, user_id, limit, adding=1)
    keypair = KeyPair(
        name=name,
        user_id=user_id,
        public_key=public_key,
        type=parsed.type,
        fingerprint=parsed.fingerprint,
        fingerprint_sha256=parsed.fingerprint_sha256,
    )
    session.add(keypair)
    try:
        # The unique constraint decides between concurrent creators, not a read before writing.
        session.flush()
    except IntegrityError as exc:
        raise KeypairExists(name=name) from exc
    if quota.recheck:
        # Others may have inserted since we counted; this count includes them and us.
        _check_quota(session, user_id, limit, adding=0)
    return keypair


def import_keypair(
    session: Session, *, user_id: str, name: str, public_key: str, key_type: str, quota: Quota
) -> KeyPair:
    parsed = keys.parse_public_key(public_key, key_type)
    return _insert(
        session, user_id=user_id, name=name, public_key=public_key, parsed=parsed, quota=quota
    )


def generate_keypair(
    session: Session, *, user_id: str, name: str, key_type: str, algorithm: str, quota: Quota
) -> tuple[KeyPair, str]:
    """Make a key pair on the server; the private key is returned once and never stored."""
    # Fail on quota before spending time on key generation.
    limit = _limit(session, user_id, quota)
    _check_quota(session, user_id, limit, adding=1)
    if key_type == "x509":
        generated = keys.generate_x509_key(user_id)
    else:
        generated = keys.generate_ssh_key("ed25519" if algorithm == "ed25519" else "rsa")
    keypair = _insert(
        session,
        user_id=user_id,
        name=name,
        public_key=generated.public_key,
        parsed=generated.parsed,
        quota=quota,
        limit=limit,
    )
    return keypair, generated.private_key


def get_keypair(session: Session, *, user_id: str, name: str) -> KeyPair:
    keypair = session.scalar(
        select(KeyPair).where(KeyPair.user_id == user_id, KeyPair.name == name)
    )
    if keypair is None:
        raise KeypairNotFound(name=name, user_id=user_id)
    return keypair


def list_keypairs(
    session: Session, *, user_id: str, limit: int | None = None, marker: str | None = None
) -> list[KeyPair]:
    """A user's key pairs by name; ``marker`` is the last name of the previous page."""
    return list(session.scalars(_list_query(session, select(KeyPair), user_id, limit, marker)))


# (name, public_key, fingerprint, type, fingerprint_sha256): what a listing shows.
ListedRow = tuple[str, str, str, str, str]


def list_keypair_rows(
    session: Session, *, user_id: str, limit: int | None = None, marker: str | None = None
) -> Sequence[ListedRow]:
    """``list_keypairs``' page as ``ListedRow`` tuples (the API's listing, keypairs/views.py
    ``index``): only these columns and no ORM objects, which made listing 100 key pairs
    several times cheaper."""
    columns = select(
        KeyPair.name,
        KeyPair.public_key,
        KeyPair.fingerprint,
        KeyPair.type,
        KeyPair.fingerprint_sha256,
    )
    # Rows unpack and index like these tuples; copying each into a real tuple would cost.
    rows: Sequence[Any] = session.execute(
        _list_query(session, columns, user_id, limit, marker)
    ).all()
    return rows


def _list_query(
    session: Session, query: _Query, user_id: str, limit: int | None, marker: str | None
) -> _Query:
    query = (
        query.where(KeyPair.user_id == user_id)
        .order_by(KeyPair.name)
        # MariaDB otherwise walks the user_id prefix of the index past the marker
        # (~8x slower for a page in the middle of 100,000 key pairs).
        .with_hint(KeyPair, f"FORCE INDEX ({UNIQUE_INDEX})", "mysql")
        .with_hint(KeyPair, f"FORCE INDEX ({UNIQUE_INDEX})", "mariadb")
    )
    if marker is not None:
        exists = session.scalar(
            select(KeyPair.id).where(KeyPair.user_id == user_id, KeyPair.name == marker)
        )
        if exists is None:
            raise MarkerNotFound(marker)
        query = query.where(KeyPair.name > marker)
    if limit is not None:
        query = query.limit(limit)
    return query


def delete_keypair(session: Session, *, user_id: str, name: str) -> None:
    result = session.execute(
        delete(KeyPair).where(KeyPair.user_id == user_id, KeyPair.name == name)
    )
    if result.rowcount == 0:  # type: ignore[attr-defined]
        raise KeypairNotFound(name=name, user_id=user_id)
