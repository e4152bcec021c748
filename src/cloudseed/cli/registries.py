"""``cloudseed image|flavor|network``: the operator's side of the registries servers use."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cloudseed.cli.context import CliContext, errors_as_click, pass_cli
from cloudseed.db.engines import Database


def _write(cli: CliContext, fn: Callable[[Any], Any]) -> Any:
    db = Database.connect("api", cli.settings().api_database_url)
    try:
        with errors_as_click(), db.write() as session:
            return fn(session)
    finally:
        db.dispose()


def _read(cli: CliContext, fn: Callable[[Any], Any]) -> Any:
    db = Database.connect("api", cli.settings().api_database_url)
    try:
        with errors_as_click(), db.read() as session:
            return fn(session)
    finally:
        db.dispose()


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
@pass_cli
def image_add(
    cli: CliContext, name: str, path: Path, disk_format: str, properties: tuple[str, ...]
) -> None:
    from cloudseed.images import service

    props = dict(p.split("=", 1) for p in properties if "=" in p)
    if len(props) != len(properties):
        raise click.BadParameter("properties are KEY=VALUE", param_hint="--property")
    uuid = _write(
        cli,
        lambda s: (
            service.add_image(
                s, name=name, path=path, disk_format=disk_format, properties=props
            ).uuid
        ),
    )
    click.echo(uuid)


@image.command("list")
@pass_cli
def image_list(cli: CliContext) -> None:
    from cloudseed.images import service

    for line in _read(
        cli,
        lambda s: [
            f"{i.uuid}\t{i.name}\t{i.disk_format}\t{i.size}" for i in service.list_images(s)
        ],
    ):
        click.echo(line)


@click.group()
def flavor() -> None:
    """Register the sizes servers are created with."""


@flavor.command("add")
@click.argument("name")
@click.option("--vcpus", type=click.IntRange(min=1), required=True)
@click.option("--ram", type=click.IntRange(min=1), required=True, help="Memory in MiB.")
@click.option("--disk", type=click.IntRange(min=0), required=True, help="Root disk in GiB.")
@click.option("--id", "flavorid", help="Flavor id (default: the name).")
@pass_cli
def flavor_add(
    cli: CliContext, name: str, vcpus: int, ram: int, disk: int, flavorid: str | None
) -> None:
    from cloudseed.flavors import service

    click.echo(
        _write(
            cli,
            lambda s: (
                service.add_flavor(
                    s, name=name, vcpus=vcpus, ram=ram, disk=disk, flavorid=flavorid
                ).flavorid
            ),
        )
    )


@flavor.command("list")
@pass_cli
def flavor_list(cli: CliContext) -> None:
    from cloudseed.flavors import service

    for line in _read(
        cli,
        lambda s: [
            f"{f.flavorid}\t{f.name}\t{f.vcpus}\t{f.memory_mb}\t{f.root_gb}"
            for f in service.list_flavors(s)
        ],
    ):
        click.echo(line)


@click.group()
def network() -> None:
    """Register networks servers get addresses from."""


@network.command("add")
@click.argument("name")
@click.option("--cidr", required=True)
@click.option("--gateway")
@click.option("--dns", multiple=True, help="DNS server (repeatable).")
@click.option("--mtu", type=int, default=1500, show_default=True)
@pass_cli
def network_add(
    cli: CliContext, name: str, cidr: str, gateway: str | None, dns: tuple[str, ...], mtu: int
) -> None:
    from cloudseed.networks import service

    click.echo(
        _write(
            cli,
            lambda s: (
                service.add_network(
                    s, name=name, cidr=cidr, gateway=gateway, dns=list(dns), mtu=mtu
                ).uuid
            ),
        )
    )


@network.command("list")
@pass_cli
def network_list(cli: CliContext) -> None:
    from cloudseed.networks import service

    rows = _read(
        cli,
        lambda s: [
            {"id": n.uuid, "name": n.name, "cidr": n.cidr, "gateway": n.gateway, "mtu": n.mtu}
            for n in service.list_networks(s)
        ],
    )
    click.echo(json.dumps(rows, indent=2))
