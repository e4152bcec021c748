"""``cloudseed flavor add|list|show``: register the sizes servers are created with."""

from __future__ import annotations

from typing import Any

import click

from cloudseed.cli.context import CliContext, pass_cli, state_options
from cloudseed.cli.output import emit_list, emit_one, output_options, pick
from cloudseed.cli.sessions import read, write
from cloudseed.flavors import service
from cloudseed.flavors.models import Flavor

LIST_COLUMNS = ("id", "name", "vcpus", "ram", "disk")


def _record(flavor: Flavor) -> dict[str, Any]:
    # The compute API's names (ram in MiB, disk in GiB), as an instance's snapshot has them.
    return {
        **service.snapshot(flavor).stored(),
        "is_public": flavor.is_public,
        "description": flavor.description,
    }


@click.group()
def flavor() -> None:
    """Register the sizes servers are created with."""


@flavor.command("add")
@click.argument("name")
@click.option("--vcpus", type=click.IntRange(min=1), required=True)
@click.option("--ram", type=click.IntRange(min=1), required=True, help="Memory in MiB.")
@click.option("--disk", type=click.IntRange(min=0), required=True, help="Root disk in GiB.")
@click.option("--id", "flavorid", help="Flavor id (default: the name).")
@output_options
@state_options
@pass_cli
def flavor_add(
    cli: CliContext,
    name: str,
    vcpus: int,
    ram: int,
    disk: int,
    flavorid: str | None,
    fmt: str,
    columns: tuple[str, ...],
) -> None:
    """Register a flavor and show it."""
    record = write(
        cli,
        lambda s: _record(
            service.add_flavor(s, name=name, vcpus=vcpus, ram=ram, disk=disk, flavorid=flavorid)
        ),
    )
    emit_one(record, fmt=fmt, columns=columns)


@flavor.command("list")
@output_options
@state_options
@pass_cli
def flavor_list(cli: CliContext, fmt: str, columns: tuple[str, ...]) -> None:
    """List the flavors."""
    records = read(cli, lambda s: [_record(f) for f in service.list_flavors(s)])
    emit_list(records, fmt=fmt, columns=columns, default=LIST_COLUMNS)


@flavor.command("show")
@click.argument("flavor_ref", metavar="ID_OR_NAME")
@output_options
@state_options
@pass_cli
def flavor_show(cli: CliContext, flavor_ref: str, fmt: str, columns: tuple[str, ...]) -> None:
    """Show one flavor, found by id or name (exit status 1 if there is none)."""
    records = read(cli, lambda s: [_record(f) for f in service.list_flavors(s)])
    emit_one(pick(records, flavor_ref, kind="flavor"), fmt=fmt, columns=columns)
