"""``cloudseed network add|list``: register the networks servers get addresses from."""

from __future__ import annotations

import json

import click

from cloudseed.cli.context import CliContext, pass_cli, state_options
from cloudseed.cli.sessions import read, write
from cloudseed.networks import service


@click.group()
def network() -> None:
    """Register networks servers get addresses from."""


@network.command("add")
@click.argument("name")
@click.option("--cidr", required=True)
@click.option("--gateway")
@click.option("--dns", multiple=True, help="DNS server (repeatable).")
@click.option("--mtu", type=int, default=1500, show_default=True)
@state_options
@pass_cli
def network_add(
    cli: CliContext, name: str, cidr: str, gateway: str | None, dns: tuple[str, ...], mtu: int
) -> None:

    click.echo(
        write(
            cli,
            lambda s: (
                service.add_network(
                    s, name=name, cidr=cidr, gateway=gateway, dns=list(dns), mtu=mtu
                ).uuid
            ),
        )
    )


@network.command("list")
@state_options
@pass_cli
def network_list(cli: CliContext) -> None:

    rows = read(
        cli,
        lambda s: [
            {"id": n.uuid, "name": n.name, "cidr": n.cidr, "gateway": n.gateway, "mtu": n.mtu}
            for n in service.list_networks(s)
        ],
    )
    click.echo(json.dumps(rows, indent=2))
