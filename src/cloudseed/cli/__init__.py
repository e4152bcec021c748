"""The ``cloudseed`` command: a thin shell over the Python API.

Each command group lives in its own module of this package; settings are loaded once per
invocation, lazily, so ``cloudseed --help`` works without a config file. ``--config`` and
``--data-dir`` go before or after the sub-command (``context.state_options``).
"""

from __future__ import annotations

import logging
import sys

import click

from cloudseed.cli import (
    compute,
    configdrive,
    db,
    flavors,
    hostkeys,
    identity,
    images,
    inject,
    keypairs,
    networks,
    nova_metadata,
    serve,
    servers,
)
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


for _command in (
    serve.serve,
    compute.compute,
    db.db,
    keypairs.keypair,
    images.image,
    flavors.flavor,
    networks.network,
    inject.inject,
    configdrive.configdrive,
    servers.server,
    hostkeys.known_hosts,
    identity.identity,
    nova_metadata.nova_metadata,
):
    cli.add_command(_command)


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
