"""``cloudseed network add|list|show``: register the networks servers get addresses from."""

from __future__ import annotations

import json
from typing import Any

import click

from cloudseed.cli.context import CliContext, pass_cli, state_options
from cloudseed.cli.output import emit_list, emit_one, output_options, pick
from cloudseed.cli.sessions import read, write
from cloudseed.networks import service
from cloudseed.networks.models import Network

LIST_COLUMNS = ("id", "name", "cidr", "gateway", "mtu")


def _record(network: Network) -> dict[str, Any]:
    return {
        "id": network.uuid,
        "name": network.name,
        "cidr": network.cidr,
        "gateway": network.gateway,
        "dns_nameservers": json.loads(network.dns_nameservers or "[]"),
        "mtu": network.mtu,
    }


@click.group()
def network() -> None:
    """Register networks servers get addresses from."""


@network.command("add")
@click.argument("name")
@click.option("--cidr", required=True)
@click.option("--gateway")
@click.option("--dns", multiple=True, help="DNS server (repeatable).")
@click.option("--mtu", type=int, default=1500, show_default=True)
@output_options
@state_options
@pass_cli
def network_add(
    cli: CliContext,
    name: str,
    cidr: str,
    gateway: str | None,
    dns: tuple[str, ...],
    mtu: int,
    fmt: str,
    columns: tuple[str, ...],
) -> None:
    """Register a network and show it."""
    record = write(
        cli,
        lambda s: _record(
            service.add_network(s, name=name, cidr=cidr, gateway=gateway, dns=list(dns), mtu=mtu)
        ),
    )
    emit_one(record, fmt=fmt, columns=columns)


@network.command("list")
@output_options
@state_options
@pass_cli
def network_list(cli: CliContext, fmt: str, columns: tuple[str, ...]) -> None:
    """List the networks."""
    records = read(cli, lambda s: [_record(n) for n in service.list_networks(s)])
    emit_list(records, fmt=fmt, columns=columns, default=LIST_COLUMNS)


@network.command("show")
@click.argument("network_ref", metavar="ID_OR_NAME")
@output_options
@state_options
@pass_cli
def network_show(cli: CliContext, network_ref: str, fmt: str, columns: tuple[str, ...]) -> None:
    """Show one network, found by id or name (exit status 1 if there is none)."""
    records = read(cli, lambda s: [_record(n) for n in service.list_networks(s)])
    emit_one(pick(records, network_ref, kind="network"), fmt=fmt, columns=columns)
