"""The ``cloudseed`` command: a thin shell over the Python API.

Each command group lives in its own module; settings are loaded once per invocation, lazily, so
``cloudseed --help`` works without a config file.
"""

from __future__ import annotations

import logging
import sys

import click

from cloudseed.cli.context import CliContext, pass_cli
from cloudseed.errors import CloudseedError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="INI file in nova.conf's layout (also CLOUDSEED_CONFIG).",
)
@click.option("--data-dir", help="Directory for cloudseed's files ([DEFAULT] state_path).")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, data_dir: str | None) -> None:
    """cloudseed: key pairs, user data and metadata for instances."""
    ctx.obj = CliContext(config_file=config_file, data_dir=data_dir)


def _register() -> None:
    from cloudseed.cli import db, registries, serve
    from cloudseed.configdrive import cli as configdrive_cli
    from cloudseed.injection import cli as injection_cli
    from cloudseed.keypairs import cli as keypair_cli

    cli.add_command(serve.serve)
    cli.add_command(db.db)
    cli.add_command(keypair_cli.keypair)
    cli.add_command(registries.image)
    cli.add_command(registries.flavor)
    cli.add_command(registries.network)
    cli.add_command(injection_cli.inject)
    cli.add_command(configdrive_cli.configdrive)


_register()


def main() -> None:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        cli(standalone_mode=True)
    except CloudseedError as exc:  # pragma: no cover - click handles most exits itself
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(1)


__all__ = ["CliContext", "cli", "main", "pass_cli"]
