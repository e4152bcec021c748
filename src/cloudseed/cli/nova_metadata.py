"""``cloudseed nova-metadata``: serve an existing Nova cloud's guests from Nova's own databases,
in place of nova-api-metadata (docs/nova-dropin.md).

It reads nova.conf (``--config-file``, repeatable, the later winning) and nothing of
cloudseed's own configuration. Before anything listens it checks what would otherwise fail at
the first request: the files and the options it reads, every database (named, password
masked, when one does not answer), Neutron's auth options, the vendordata file, and with
``[cloudseed_metadata] connection`` cloudseed's own database and its signing key. A problem
is one line and exit status 2.

Its sub-commands work on cloudseed's own database (signed identity, docs/identity.md), with
the same ``--config-file`` options before them: ``db sync`` creates or upgrades it and makes
the first signing key; ``identity rotate|list`` as ``cloudseed identity``; ``identity
jwks|certificates`` print the published keys for relying parties that cannot reach the
listener.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from cloudseed.cli.identity import LIST_COLUMNS, key_records, rotate_keys
from cloudseed.cli.output import emit_list, emit_one, output_options
from cloudseed.errors import CloudseedError, ConfigError

if TYPE_CHECKING:
    from cloudseed.db.engines import Database
    from cloudseed.identity.keyring import PublishedKey
    from cloudseed.nova_metadata.config import NovaMetadataConfig


class ConfigProblem(click.ClickException):
    exit_code = 2


@dataclass(frozen=True)
class _Invocation:
    config_files: tuple[str, ...]

    def sync_hint(self) -> str:
        files = " ".join(f"--config-file {path}" for path in self.config_files)
        return f"run `cloudseed nova-metadata {files} db sync`"


def _host_port(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{value!r} is not HOST:PORT", param_hint="--listen")
    return host.strip("[]") or "0.0.0.0", int(port)


@click.group("nova-metadata", invoke_without_command=True)
@click.option(
    "--config-file",
    "config_files",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False),
    help="nova.conf (repeat for more files; the later wins).",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Address to listen on (default [DEFAULT] metadata_listen:metadata_listen_port, "
    "0.0.0.0:8775).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes (default [DEFAULT] metadata_workers, else one per CPU).",
)
@click.pass_context
def nova_metadata(
    ctx: click.Context, config_files: tuple[str, ...], listen: str | None, workers: int | None
) -> None:
    """Serve Nova's metadata API (both trees) from Nova's databases until SIGTERM; or, with a
    sub-command, manage cloudseed's own database of signing keys."""
    invocation = ctx.obj = _Invocation(config_files)
    if ctx.invoked_subcommand is None:
        _serve(invocation, _host_port(listen), workers)


def _serve(invocation: _Invocation, listen: tuple[str, int] | None, workers: int | None) -> None:
    from cloudseed import serve as serving
    from cloudseed.listening import Listener
    from cloudseed.nova_metadata import config as nova_config
    from cloudseed.nova_metadata.app import create_app
    from cloudseed.nova_metadata.preflight import preflight
    from cloudseed.schema import sync as schema_sync

    def schema_current(db: Database) -> None:
        schema_sync.require_head(db, "nova_metadata", hint=invocation.sync_hint())

    try:
        config = nova_config.load(list(invocation.config_files), listen=listen, workers=workers)
        preflight(config, schema_current=schema_current)
    except CloudseedError as exc:
        raise ConfigProblem(exc.message) from None
    logging.getLogger().setLevel(logging.INFO)
    listener = Listener(
        "Nova metadata service",
        config.listen_host,
        config.listen_port,
        lambda _settings, _db: create_app(config),
        kind="metadata",
        uses_api_db=False,
    )
    try:
        serving.run(config.settings, chosen=[listener])
    except CloudseedError as exc:
        raise click.ClickException(exc.message) from None
    except OSError as exc:  # the address is taken, say
        raise ConfigProblem(
            f"cannot listen on {config.listen_host}:{config.listen_port}: {exc.strerror}"
        ) from None


# -- cloudseed's own database: signed identity's keys --------------------------------------------


@contextmanager
def _own_database(
    invocation: _Invocation, *, current: bool = True
) -> Iterator[tuple[NovaMetadataConfig, Database]]:
    """nova.conf's ``[cloudseed_metadata] connection``, answering (and at the newest revision
    when ``current``); CloudseedErrors become one line on stderr."""
    from cloudseed.nova_metadata import config as nova_config
    from cloudseed.nova_metadata.identity import check_database, open_database
    from cloudseed.schema import sync as schema_sync

    try:
        config = nova_config.load(list(invocation.config_files))
        if config.identity_database_url is None:
            raise ConfigError(
                "[cloudseed_metadata] connection is not set: the drop-in has no database of "
                "its own (signed identity is off)"
            )
        db = open_database(config)
    except CloudseedError as exc:
        raise ConfigProblem(exc.message) from None
    try:
        try:
            check_database(db)
            if current:
                schema_sync.require_head(db, "nova_metadata", hint=invocation.sync_hint())
        except CloudseedError as exc:
            raise ConfigProblem(exc.message) from None
        try:
            yield config, db
        except CloudseedError as exc:
            raise click.ClickException(exc.message) from None
    finally:
        db.dispose()


@nova_metadata.group("db")
def db_group() -> None:
    """cloudseed's own database of the drop-in ([cloudseed_metadata] connection)."""


@db_group.command("sync")
@click.pass_obj
def db_sync(invocation: _Invocation) -> None:
    """Create or upgrade it to the newest schema, and make the first signing key. Run it once
    (not on every host at once) before the drop-in starts with the option, and after each
    upgrade of cloudseed."""
    from cloudseed.nova_metadata.identity import NovaIdentity
    from cloudseed.schema import sync as schema_sync

    with _own_database(invocation, current=False) as (config, db):
        schema_sync.upgrade(db, "nova_metadata")
        click.echo(f"{db.name}: at revision {schema_sync.head_revision('nova_metadata')}")
        click.echo(f"identity: signing key {NovaIdentity(config.settings, db).check()}")


@nova_metadata.group("identity")
def identity_group() -> None:
    """The keys the drop-in signs instance identities with (docs/identity.md)."""


@identity_group.command("rotate")
@output_options
@click.pass_obj
def identity_rotate(invocation: _Invocation, fmt: str, columns: tuple[str, ...]) -> None:
    """Make a new signing key, as `cloudseed identity rotate` (published at once, signing
    after twice identity_key_cache_seconds; the one it replaces stays published for
    identity_key_grace_seconds)."""
    with _own_database(invocation) as (config, db):
        record = rotate_keys(db, config.settings)
    emit_one(record, fmt=fmt, columns=columns)


@identity_group.command("list")
@output_options
@click.pass_obj
def identity_list(invocation: _Invocation, fmt: str, columns: tuple[str, ...]) -> None:
    """List the stored keys and their states (signing, next, published, dropped)."""
    with _own_database(invocation) as (config, db):
        records = key_records(db, config.settings)
    emit_list(records, fmt=fmt, columns=columns, default=LIST_COLUMNS)


@identity_group.command("jwks")
@click.pass_obj
def identity_jwks(invocation: _Invocation) -> None:
    """Print the published keys as a JWK Set (what GET /v2.1/instance-identity/jwks on the
    listener answers)."""
    from cloudseed.identity import publication

    published = _published(invocation)
    click.echo(json.dumps(publication.jwks(published), indent=2))


@identity_group.command("certificates")
@click.pass_obj
def identity_certificates(invocation: _Invocation) -> None:
    """Print the published keys' X.509 certificates, PEM, newest first (for openssl
    -certfile/-CAfile)."""
    from cloudseed.identity import publication

    published = _published(invocation)
    click.echo(publication.certificates_pem(published), nl=False)


def _published(invocation: _Invocation) -> list[PublishedKey]:
    """The keys published now: the current one and the retired ones in their grace period."""
    from cloudseed.identity.keyring import Keyring

    with _own_database(invocation) as (config, db):
        keyring = Keyring(db, config.settings.identity)
        return keyring.published(keyring.load())
