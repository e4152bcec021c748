"""``cloudseed keypair list|show|import|delete``: operator access to any user's key pairs,
through the same service functions as the API (same validation, quota and messages)."""

from __future__ import annotations

from typing import Any

import click

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli, state_options
from cloudseed.cli.output import emit_list, emit_one, output_options
from cloudseed.cli.sessions import read, write
from cloudseed.keypairs import service
from cloudseed.keypairs.models import KeyPair
from cloudseed.keypairs.schemas import NAME_V292
from cloudseed.web.validation import validate

user_option = click.option("--user", "user_id", required=True, help="Owner of the key pairs.")
LIST_COLUMNS = ("name", "type", "fingerprint", "fingerprint_sha256")


def _record(keypair: KeyPair) -> dict[str, Any]:
    return {
        "name": keypair.name,
        "user_id": keypair.user_id,
        "type": keypair.type,
        "fingerprint": keypair.fingerprint,
        "fingerprint_sha256": keypair.fingerprint_sha256,
        "public_key": keypair.public_key,
        "created_at": keypair.created_at.isoformat(),
    }


@click.group()
def keypair() -> None:
    """Manage key pairs in the API database."""


@keypair.command("list")
@user_option
@output_options
@state_options
@pass_cli
def list_(cli: CliContext, user_id: str, fmt: str, columns: tuple[str, ...]) -> None:
    """List a user's key pairs."""
    records = read(cli, lambda s: [_record(k) for k in service.list_keypairs(s, user_id=user_id)])
    emit_list(records, fmt=fmt, columns=columns, default=LIST_COLUMNS)


@keypair.command()
@click.argument("name")
@user_option
@output_options
@state_options
@pass_cli
def show(cli: CliContext, name: str, user_id: str, fmt: str, columns: tuple[str, ...]) -> None:
    """Show one key pair."""
    record = read(cli, lambda s: _record(service.get_keypair(s, user_id=user_id, name=name)))
    emit_one(record, fmt=fmt, columns=columns)


@keypair.command("import")
@click.argument("name")
@user_option
@click.option(
    "--public-key",
    "public_key_file",
    type=click.File("r"),
    required=True,
    help="File with the OpenSSH public key or the x509 PEM certificate ('-' for standard input).",
)
@click.option(
    "--type", "key_type", type=click.Choice(["ssh", "x509"]), default="ssh", show_default=True
)
@click.option(
    "--project",
    "project_id",
    help="Project whose quota overrides apply (default: none, the [quota] default).",
)
@output_options
@state_options
@pass_cli
def import_(
    cli: CliContext,
    name: str,
    user_id: str,
    public_key_file: Any,
    key_type: str,
    project_id: str | None,
    fmt: str,
    columns: tuple[str, ...],
) -> None:
    """Import a public key for a user."""
    settings = cli.settings()
    quota = service.Quota(
        default=settings.quota.key_pairs,
        recheck=settings.quota.recheck_quota,
        project_id=project_id or "",
    )
    with errors_as_click():
        validate({"type": "object", "properties": {"name": NAME_V292}}, {"name": name})
    public_key = public_key_file.read()
    record = write(
        cli,
        lambda s: _record(
            service.import_keypair(
                s,
                user_id=user_id,
                name=name,
                public_key=public_key,
                key_type=key_type,
                quota=quota,
            )
        ),
    )
    emit_one(record, fmt=fmt, columns=columns)


@keypair.command()
@click.argument("name")
@user_option
@state_options
@pass_cli
def delete(cli: CliContext, name: str, user_id: str) -> None:
    """Delete a key pair (instances keep their copy)."""
    write(cli, lambda s: service.delete_keypair(s, user_id=user_id, name=name))
    click.echo(f"deleted {name} of {user_id}")
