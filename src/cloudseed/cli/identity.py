"""``cloudseed identity rotate|list``: the keys signed instance identities are signed with."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click
from sqlalchemy.exc import IntegrityError

from cloudseed.cli.context import (
    CliContext,
    errors_as_click,
    open_databases,
    pass_cli,
    state_options,
)
from cloudseed.cli.output import emit_list, emit_one, output_options
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.identity import service
from cloudseed.identity.errors import RotationConflict
from cloudseed.identity.keyring import Keyring
from cloudseed.settings import Settings

LIST_COLUMNS = ("kid", "state", "created_at", "retired_at", "published_until")


def _time(value: dt.datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


@click.group()
def identity() -> None:
    """The keys instance identity documents and tokens are signed with (docs/identity.md)."""


@identity.command("rotate")
@output_options
@state_options
@pass_cli
def identity_rotate(cli: CliContext, fmt: str, columns: tuple[str, ...]) -> None:
    """Make a new signing key. It is published at once and signs once every process has
    seen it (twice [identity] key_cache_seconds); the key it replaces stays published for
    [identity] key_grace_seconds. Keys whose grace period has ended are deleted."""
    settings = cli.settings()
    with open_databases(cli) as dbs, errors_as_click():
        record = rotate_keys(dbs.api, settings)
    emit_one(record, fmt=fmt, columns=columns)


@identity.command("list")
@output_options
@state_options
@pass_cli
def identity_list(cli: CliContext, fmt: str, columns: tuple[str, ...]) -> None:
    """List the stored keys: the one that signs, the others still published, and the ones
    whose grace period has ended (deleted at the next rotation)."""
    settings = cli.settings()
    with open_databases(cli) as dbs, errors_as_click():
        records = key_records(dbs.api, settings)
    emit_list(records, fmt=fmt, columns=columns, default=LIST_COLUMNS)


def rotate_keys(db: Database, settings: Settings) -> dict[str, Any]:
    """``identity rotate`` on ``db`` (the API database, or the Nova drop-in's own): what
    it prints."""
    now = utcnow()
    try:
        rotation = db.run(
            lambda session: service.rotate(
                session,
                now=now,
                grace=dt.timedelta(seconds=settings.identity.key_grace_seconds),
                secret=settings.identity.key_encryption_secret,
            ),
            write=True,
        )
    except IntegrityError:
        raise RotationConflict() from None
    activation = dt.timedelta(seconds=2 * settings.identity.key_cache_seconds)
    grace = dt.timedelta(seconds=settings.identity.key_grace_seconds)
    return {
        "kid": rotation.new_kid,
        "signs_from": _time(now + activation),
        "retired": rotation.retired_kid,
        "retired_published_until": _time(now + grace) if rotation.retired_kid else None,
        "removed": " ".join(rotation.removed),
    }


def key_records(db: Database, settings: Settings) -> list[dict[str, Any]]:
    """``identity list`` on ``db``: each stored key and its state."""
    with db.read() as session:
        stored = service.stored_keys(session)
    return _records(settings, stored, utcnow())


def _records(
    settings: Settings, stored: list[service.StoredKey], now: dt.datetime
) -> list[dict[str, Any]]:
    grace = dt.timedelta(seconds=settings.identity.key_grace_seconds)
    keyset = service.KeySet(
        tuple(stored), grace, dt.timedelta(seconds=2 * settings.identity.key_cache_seconds)
    )
    signing = keyset.signing(now)
    published = {k.kid for k in keyset.published(now)}
    records = []
    for key in stored:
        if signing is not None and key.kid == signing.kid:
            state = "signing"
        elif key.kid not in published:
            state = "dropped"
        else:
            state = "next" if key.current else "published"
        records.append(
            {
                "kid": key.kid,
                "state": state,
                "created_at": _time(key.created_at),
                "retired_at": _time(key.retired_at),
                "published_until": _time(key.published_until(grace)),
            }
        )
    return records


def ensure_first_key(cli: CliContext) -> str:
    """The current key's kid, made now if there is none (``db sync``)."""
    settings = cli.settings()
    with open_databases(cli) as dbs, errors_as_click():
        keyring = Keyring(dbs.api, settings.identity)
        keyset = keyring.load()
    current = next(k for k in keyset.keys if k.current)
    return current.kid
