"""``cloudseed image add|list``: register the disk images servers boot from."""

from __future__ import annotations

from pathlib import Path

import click

from cloudseed.cli.context import CliContext, pass_cli, state_options
from cloudseed.cli.sessions import read, write
from cloudseed.images import service


@click.group()
def image() -> None:
    """Register disk images servers boot from."""


@image.command("add")
@click.argument("name")
@click.option(
    "--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option("--disk-format", type=click.Choice(["raw", "qcow2"]), required=True)
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Image property, e.g. img_config_drive=mandatory (repeatable).",
)
@state_options
@pass_cli
def image_add(
    cli: CliContext, name: str, path: Path, disk_format: str, properties: tuple[str, ...]
) -> None:

    props = dict(p.split("=", 1) for p in properties if "=" in p)
    if len(props) != len(properties):
        raise click.BadParameter("properties are KEY=VALUE", param_hint="--property")
    uuid = write(
        cli,
        lambda s: (
            service.add_image(
                s, name=name, path=path, disk_format=disk_format, properties=props
            ).uuid
        ),
    )
    click.echo(uuid)


@image.command("list")
@state_options
@pass_cli
def image_list(cli: CliContext) -> None:

    for line in read(
        cli,
        lambda s: [
            f"{i.uuid}\t{i.name}\t{i.disk_format}\t{i.size}" for i in service.list_images(s)
        ],
    ):
        click.echo(line)
