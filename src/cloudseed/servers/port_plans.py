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
from cloudseed.servers.models import FixedIP, Port


def unique_macs(
    cell: Database, ports: dict[str, list[networks.PortPlan]]
) -> dict[str, list[networks.PortPlan]]:
    """Random MACs (24 random bits) collide now and then in a large cloud (about 3 times in
    10,000 ports): draw again for any MAC already in the cell or in this request."""
    plans = [p for group in ports.values() for p in group]
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


def plan(
    session: Any, requested: list[dict[str, Any]] | str | None, instance_uuid: str
) -> list[networks.PortPlan]:
    if requested == "none":
        return []
    if requested in (None, "auto", []):
        available = networks.list_networks(session)
        return (
            [networks.allocate(session, network=available[0], instance_uuid=instance_uuid)]
            if available
            else []
        )
    plans = []
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
        network = networks.get_network(session, item["uuid"])
        plans.append(
            networks.allocate(
                session, network=network, instance_uuid=instance_uuid, fixed_ip=item.get("fixed_ip")
            )
        )
    return plans


def add(session: Any, instance_uuid: str, plan: networks.PortPlan) -> None:
    session.add(
        Port(
            uuid=plan.uuid,
            instance_uuid=instance_uuid,
            network_id=plan.network_id,
            network_name=plan.network_name,
            mac_address=plan.mac_address,
            mtu=plan.mtu,
            network_info=json.dumps(
                {
                    "cidr": plan.cidr,
                    "gateway": plan.gateway,
                    "dns_nameservers": plan.dns_nameservers,
                }
            ),
        )
    )
    session.flush()
    session.add(
        FixedIP(
            address=plan.address,
            version=plan.version,
            port_uuid=plan.uuid,
            instance_uuid=instance_uuid,
        )
    )
