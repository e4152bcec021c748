"""``cloudseed db sync`` and ``cloudseed db check``."""

from __future__ import annotations

import click

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli


@click.group()
def db() -> None:
    """Create, upgrade and check the API and cell databases."""


@db.command()
@pass_cli
def sync(cli: CliContext) -> None:
    """Create or upgrade the API database and every cell database to the newest schema."""
    from cloudseed.db import migrate

    with errors_as_click():
        for result in migrate.sync(cli.settings()):
            click.echo(f"{result.database}: at revision {result.revision}")


@db.command()
@pass_cli
def check(cli: CliContext) -> None:
    """Fail unless every database is at the newest revision and matches the models."""
    from cloudseed.db import migrate

    with errors_as_click():
        migrate.check(cli.settings())
    click.echo("all databases match the models")
