"""``cloudseed db sync`` and ``cloudseed db check``."""

from __future__ import annotations

import click

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli, state_options
from cloudseed.cli.identity import ensure_first_key
from cloudseed.schema import sync as schema_sync


@click.group()
def db() -> None:
    """Create, upgrade and check the API and cell databases."""


@db.command()
@state_options
@pass_cli
def sync(cli: CliContext) -> None:
    """Create or upgrade the API database and every cell database to the newest schema, and
    make the first identity signing key."""
    with errors_as_click():
        for result in schema_sync.sync(cli.settings()):
            click.echo(f"{result.database}: at revision {result.revision}")
    # Here rather than at serve: one process, before any worker starts, so N workers on M
    # hosts never race to make it (they could: the first to find none makes it, safely).
    click.echo(f"identity: signing key {ensure_first_key(cli)}")


@db.command()
@state_options
@pass_cli
def check(cli: CliContext) -> None:
    """Fail unless every database is at the newest revision and matches the models."""
    with errors_as_click():
        schema_sync.check(cli.settings())
    click.echo("all databases match the models")
