"""A new server's ports: planned in the API database (networks, addresses, MACs), then
written to the cell database with the instance (``creation.create_servers``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sqlalchemy import select

from cloudseed.db.engines import Database
from cloudseed.errors import InvalidInput
from cloudseed.networks import service as networks
from cloudseed.networks.models import Network
from cloudseed.servers.models import Port


def unique_macs(
    cell: Database, ports: dict[str, list[networks.PortPlan]]
) -> dict[str, list[networks.PortPlan]]:
    """Random MACs (24 random bits) collide now and then in a large cloud (about 3 times in
    10,000 ports): draw again for any MAC already in the cell or in this request."""
    plans = [p for group in ports.values() for p in group]
    if not plans:  # servers without a network ("none", or no network defined)
        return ports
    with cell.read() as session:
        taken = set(
            session.scalars(
                select(Port.mac_address).where(Port.mac_address.in_([p.mac_address for p in plans]))
            )
        )
    fixed: dict[str, list[networks.PortPlan]] = {}
    for uuid_, group in ports.items():
        fixed[uuid_] = []
        for plan in group:
            while plan.mac_address in taken:
                plan = dataclasses.replace(plan, mac_address=networks.random_mac())
            taken.add(plan.mac_address)
            fixed[uuid_].append(plan)
    return fixed


def plan_all(
    session: Any, requested: list[dict[str, Any]] | str | None, instance_uuids: list[str]
) -> dict[str, list[networks.PortPlan]]:
    """The ports of each new server as the request's ``networks`` asks (the same for each),
    their addresses reserved: the networks looked up once, the reservations sent together."""
    chosen = _networks(session, requested)
    plans = {
        uuid_: [
            networks.allocate(session, network=net, instance_uuid=uuid_, fixed_ip=fixed_ip)
            for net, fixed_ip in chosen
        ]
        for uuid_ in instance_uuids
    }
    networks.flush_allocations(session)
    return plans


def _networks(
    session: Any, requested: list[dict[str, Any]] | str | None
) -> list[tuple[Network, str | None]]:
    """Each port's network and requested fixed IP, in the request's order."""
    if requested == "none":
        return []
    if requested in (None, "auto", []):
        available = networks.list_networks(session)
        return [(available[0], None)] if available else []
    assert isinstance(requested, list)
    for item in requested:
        if item.get("port"):
            raise InvalidInput(
                "Requesting a pre-made port is not supported; ask for a "
                "network uuid (cloudseed manages ports itself)."
            )
        if "uuid" not in item:
            raise InvalidInput(
                f"Bad networks format: network uuid is not in proper format ({item})"
            )
    return [
        (networks.get_network(session, item["uuid"]), item.get("fixed_ip")) for item in requested
    ]


def requested_tags(requested: list[dict[str, Any]] | str | None) -> list[str | None]:
    """Each planned port's device role tag (the request's ``networks`` items, in order; the
    schema allows ``tag`` from 2.32); none for "auto" and "none"."""
    return [item.get("tag") for item in requested] if isinstance(requested, list) else []


def port_row(instance_uuid: str, plan: networks.PortPlan, tag: str | None = None) -> Port:
    """The planned port's row; its fixed IP's row (``fixed_ip_row``) refers to it, so it must
    be flushed first (the ORM does not order unrelated rows by their foreign keys)."""
    return Port(
        tag=tag,
        uuid=plan.uuid,
        instance_uuid=instance_uuid,
        network_id=plan.network_id,
        network_name=plan.network_name,
        mac_address=plan.mac_address,
        mtu=plan.mtu,
        network_info=json.dumps(plan.network_info()),
    )


def fixed_ip_row(instance_uuid: str, plan: networks.PortPlan) -> dict[str, Any]:
    """The planned port's fixed IP, as a row for one INSERT of many (nothing refers to it)."""
    return {
        "address": plan.address,
        "version": plan.version,
        "port_uuid": plan.uuid,
        "instance_uuid": instance_uuid,
    }
