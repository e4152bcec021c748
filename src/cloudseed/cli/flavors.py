"""``cloudseed flavor add|list``: register the sizes servers are created with."""

from __future__ import annotations

import click

from cloudseed.cli.context import CliContext, pass_cli, state_options
from cloudseed.cli.sessions import read, write
from cloudseed.flavors import service


@click.group()
def flavor() -> None:
    """Register the sizes servers are created with."""


@flavor.command("add")
@click.argument("name")
@click.option("--vcpus", type=click.IntRange(min=1), required=True)
@click.option("--ram", type=click.IntRange(min=1), required=True, help="Memory in MiB.")
@click.option("--disk", type=click.IntRange(min=0), required=True, help="Root disk in GiB.")
@click.option("--id", "flavorid", help="Flavor id (default: the name).")
@state_options
@pass_cli
def flavor_add(
    cli: CliContext, name: str, vcpus: int, ram: int, disk: int, flavorid: str | None
) -> None:

    click.echo(
        write(
            cli,
            lambda s: (
                service.add_flavor(
                    s, name=name, vcpus=vcpus, ram=ram, disk=disk, flavorid=flavorid
                ).flavorid
            ),
        )
    )


@flavor.command("list")
@state_options
@pass_cli
def flavor_list(cli: CliContext) -> None:

    for line in read(
        cli,
        lambda s: [
            f"{f.flavorid}\t{f.name}\t{f.vcpus}\t{f.memory_mb}\t{f.root_gb}"
            for f in service.list_flavors(s)
        ],
    ):
        click.echo(line)
