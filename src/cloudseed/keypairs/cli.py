"""``cloudseed keypair list|show|import|delete``: operator access to any user's key pairs,
through the same service functions as the API (same validation, quota and messages)."""

from __future__ import annotations

import json
from typing import Any

import click

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli
from cloudseed.db.engines import Database
from cloudseed.keypairs import service
from cloudseed.keypairs.models import KeyPair

user_option = click.option("--user", "user_id", required=True, help="Owner of the key pairs.")
format_option = click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)


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


def _api_db(cli: CliContext) -> Database:
    return Database.connect("api", cli.settings().api_database_url)


@click.group()
def keypair() -> None:
    """Manage key pairs in the API database."""


@keypair.command("list")
@user_option
@format_option
@pass_cli
def list_(cli: CliContext, user_id: str, fmt: str) -> None:
    """List a user's key pairs."""
    db = _api_db(cli)
    with errors_as_click(), db.read() as session:
        records = [_record(k) for k in service.list_keypairs(session, user_id=user_id)]
    db.dispose()
    if fmt == "json":
        click.echo(json.dumps(records, indent=2))
        return
    for r in records:
        click.echo(f"{r['name']}\t{r['type']}\t{r['fingerprint']}\t{r['fingerprint_sha256']}")


@keypair.command()
@click.argument("name")
@user_option
@format_option
@pass_cli
def show(cli: CliContext, name: str, user_id: str, fmt: str) -> None:
    """Show one key pair."""
    db = _api_db(cli)
    with errors_as_click(), db.read() as session:
        record = _record(service.get_keypair(session, user_id=user_id, name=name))
    db.dispose()
    if fmt == "json":
        click.echo(json.dumps(record, indent=2))
        return
    for key, value in record.items():
        click.echo(f"{key}: {value}")


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
@format_option
@pass_cli
def import_(
    cli: CliContext,
    name: str,
    user_id: str,
    public_key_file: Any,
    key_type: str,
    project_id: str | None,
    fmt: str,
) -> None:
    """Import a public key for a user."""
    from cloudseed.keypairs.schemas import NAME_V292
    from cloudseed.web.validation import validate

    settings = cli.settings()
    quota = service.Quota(
        default=settings.quota.key_pairs,
        recheck=settings.quota.recheck_quota,
        project_id=project_id or "",
    )
    db = _api_db(cli)
    with errors_as_click():
        validate({"type": "object", "properties": {"name": NAME_V292}}, {"name": name})
        with db.write() as session:
            record = _record(
                service.import_keypair(
                    session,
                    user_id=user_id,
                    name=name,
                    public_key=public_key_file.read(),
                    key_type=key_type,
                    quota=quota,
                )
            )
    db.dispose()
    if fmt == "json":
        click.echo(json.dumps(record, indent=2))
    else:
        click.echo(
            f"imported {record['name']} for {record['user_id']}: {record['fingerprint_sha256']}"
        )


@keypair.command()
@click.argument("name")
@user_option
@pass_cli
def delete(cli: CliContext, name: str, user_id: str) -> None:
    """Delete a key pair (instances keep their copy)."""
    db = _api_db(cli)
    with errors_as_click(), db.write() as session:
        service.delete_keypair(session, user_id=user_id, name=name)
    db.dispose()
    click.echo(f"deleted {name} of {user_id}")
