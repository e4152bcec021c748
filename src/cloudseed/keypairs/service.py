"""Key pair operations on an API database session. Routes and the CLI both call these; the
caller owns the transaction (``Database.run``), so a failure anywhere leaves nothing behind.
Creating and deleting also take a Core connection (``Database.run(..., core=True)``): the API's
routes use one, as these run Core statements only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import (
    Connection,
    Select,
    String,
    Table,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.keypairs import key_material as keys
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


# Creating and deleting run Core statements built once, on the session's connection: the ORM's
# flush and statement building were most of an import's time in the database layer (about
# 0.6 ms of 0.75 ms on SQLite), and nothing here needs an object in the session.
_TABLE = cast(Table, KeyPair.__table__)
_USER = bindparam("user_id", type_=String)
_COUNT = select(func.count()).select_from(_TABLE).where(_TABLE.c.user_id == _USER)
_LIMIT = quotas.limit_expression(RESOURCE)
# The limit and the count in one round trip. An unlimited user is not counted (a scan of all
# their key pairs): CASE evaluates the branch it takes only.
_LIMIT_AND_COUNT = select(
    _LIMIT, case((_LIMIT == quotas.UNLIMITED, None), else_=_COUNT.scalar_subquery())
)
_INSERT = insert(_TABLE)
_NAMED = (_TABLE.c.user_id == _USER) & (_TABLE.c.name == bindparam("name", type_=String))
_DELETE = delete(_TABLE).where(_NAMED)
# Showing one: a Core read of the row, made a detached KeyPair (a Session's set-up, identity
# map and statement building were most of key pair show's database time).
_GET = select(_TABLE).where(_NAMED)


def _connection(session: Session | Connection) -> Connection:
    if isinstance(session, Connection):
        return session
    # Key pairs this session holds but has not written yet count too, as with an ORM query.
    session.flush()
    return session.connection()


def count(session: Session | Connection, user_id: str) -> int:
    return int(_connection(session).execute(_COUNT, {"user_id": user_id}).scalar_one())


def _check_quota(session: Session | Connection, user_id: str, quota: Quota) -> int:
    """The user's key pair limit, after making sure one more fits under it."""
    params = quotas.limit_params(
        project_id=quota.project_id, user_id=user_id, default=quota.default
    )
    limit, used = (
        _connection(session).execute(_LIMIT_AND_COUNT, {**params, "user_id": user_id}).one()
    )
    if limit != quotas.UNLIMITED and not quotas.within(limit, used + 1):
        raise KeypairLimitExceeded(limit=limit)
    return int(limit)


def _insert(
    session: Session | Connection,
    *,
    user_id: str,
    name: str,
    public_key: str,
    parsed: keys.ParsedKey,
    quota: Quota,
) -> KeyPair:
    connection = _connection(session)
    limit = _check_quota(connection, user_id, quota)
    values = {
        "name": name,
        "user_id": user_id,
        "public_key": public_key,
        "type": parsed.type,
        "fingerprint": parsed.fingerprint,
        "fingerprint_sha256": parsed.fingerprint_sha256,
        "created_at": utcnow(),
        "updated_at": None,
    }
    try:
        # The unique constraint decides between concurrent creators, not a read before writing.
        result = connection.execute(_INSERT, values)
    except IntegrityError as exc:
        raise KeypairExists(name=name) from exc
    # Others may have inserted since we counted; this count includes them and us. (Unlimited
    # users are not counted, as above.)
    if (
        quota.recheck
        and limit != quotas.UNLIMITED
        and not quotas.within(limit, count(connection, user_id))
    ):
        raise KeypairLimitExceeded(limit=limit)
    # What was written, as a detached object (the session never held it).
    (keypair_id,) = result.inserted_primary_key or (None,)
    return KeyPair(id=keypair_id, **values)


def import_keypair(
    session: Session | Connection,
    *,
    user_id: str,
    name: str,
    public_key: str,
    key_type: str,
    quota: Quota,
) -> KeyPair:
    parsed = keys.parse_public_key(public_key, key_type)
    return _insert(
        session, user_id=user_id, name=name, public_key=public_key, parsed=parsed, quota=quota
    )


def generate_keypair(
    session: Session | Connection,
    *,
    user_id: str,
    name: str,
    key_type: str,
    algorithm: str,
    quota: Quota,
) -> tuple[KeyPair, str]:
    """Make a key pair on the server; the private key is returned once and never stored."""
    # Fail on quota before spending time on key generation (_insert checks again after it).
    _check_quota(session, user_id, quota)
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
    )
    return keypair, generated.private_key


def get_keypair(session: Session | Connection, *, user_id: str, name: str) -> KeyPair:
    """The user's key pair of that name, as a detached object."""
    row = _connection(session).execute(_GET, {"user_id": user_id, "name": name}).first()
    if row is None:
        raise KeypairNotFound(name=name, user_id=user_id)
    return KeyPair(**row._mapping)


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


def delete_keypair(session: Session | Connection, *, user_id: str, name: str) -> None:
    result = _connection(session).execute(_DELETE, {"user_id": user_id, "name": name})
    if result.rowcount == 0:
        raise KeypairNotFound(name=name, user_id=user_id)
