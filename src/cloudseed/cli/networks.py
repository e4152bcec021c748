"""``cloudseed network add|list|show|delete``: the networks servers get addresses from.

Each network's ``--mode`` says how the qemu driver builds it (docs/qemu-driver.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from cloudseed.cli.context import CliContext, pass_cli, state_options
from cloudseed.cli.output import emit_list, emit_one, output_options, pick
from cloudseed.cli.sessions import read, write
from cloudseed.networks import service
from cloudseed.networks.models import Network

LIST_COLUMNS = ("id", "name", "cidr", "gateway", "mtu", "mode")


def _record(network: Network) -> dict[str, Any]:
    return {
        "id": network.uuid,
        "name": network.name,
        "cidr": network.cidr,
        "gateway": network.gateway,
        "dns_nameservers": json.loads(network.dns_nameservers or "[]"),
        "mtu": network.mtu,
        "mode": network.mode,
        "egress": bool(network.egress),
        "ec2_metadata_address": bool(network.ec2_metadata_address),
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
@click.option(
    "--mode",
    type=click.Choice(service.MODES),
    default=service.SLIRP,
    show_default=True,
    help="How the qemu driver builds it: slirp (each guest alone on QEMU's user-mode "
    "network) or bridge (the network's guests on one bridge in a namespace of its own; "
    "IPv4 needs --gateway).",
)
@click.option(
    "--egress/--no-egress",
    default=False,
    show_default=True,
    help="Bridged networks: let guests reach beyond the network (through a user-mode "
    "uplink of the namespace, never the host's own interfaces or loopback).",
)
@click.option(
    "--ec2-metadata-address/--no-ec2-metadata-address",
    default=False,
    show_default=True,
    help="Bridged networks: the metadata proxy also answers at [fd00:ec2::254]:80.",
)
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
    mode: str,
    egress: bool,
    ec2_metadata_address: bool,
    fmt: str,
    columns: tuple[str, ...],
) -> None:
    """Register a network and show it."""
    record = write(
        cli,
        lambda s: _record(
            service.add_network(
                s,
                name=name,
                cidr=cidr,
                gateway=gateway,
                dns=list(dns),
                mtu=mtu,
                mode=mode,
                egress=egress,
                ec2_metadata_address=ec2_metadata_address,
            )
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


@network.command("delete")
@click.argument("network_ref", metavar="ID_OR_NAME")
@state_options
@pass_cli
def network_delete(cli: CliContext, network_ref: str) -> None:
    """Remove a network no server uses (exit status 1 while one does). Compute hosts take
    down what they built for it when their agents next start."""
    write(cli, lambda s: service.delete_network(s, network_ref).uuid)
