"""Where a create asks its servers to go, as the scheduler's request: the availability zone
(with an admin's host and node in it), 2.74's ``host`` and ``hypervisor_hostname``, the
default schedule zone, and the hosts the scheduler hints name."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from cloudseed.errors import Forbidden
from cloudseed.hosts import scheduler
from cloudseed.servers.creation import scheduler_hints


@dataclass(frozen=True)
class Destination:
    zone: str | None
    host: str | None
    node: str | None


def parse(
    availability_zone: str | None,
    *,
    requested_host: str | None,
    requested_node: str | None,
    admin: bool,
    default_zone: str,
) -> Destination:
    """``availability_zone`` as "zone", "zone:host", "zone::node" or "zone:host:node" (the host
    and node parts for admins, as Nova's forced_host policy), or 2.74's ``host`` and
    ``hypervisor_hostname`` (admins)."""
    zone, host, node = availability_zone, requested_host, requested_node
    if zone and ":" in zone:
        parts = zone.split(":", 2)
        zone = parts[0] or None
        host = parts[1] or None if len(parts) > 1 else None
        node = parts[2] or None if len(parts) > 2 else None
        if (host or node) and not admin:
            raise Forbidden(
                "Policy doesn't allow os_compute_api:servers:create:forced_host to be performed."
            )
    if (requested_host or requested_node) and not admin:
        raise Forbidden(
            "Policy doesn't allow compute:servers:create:requested_destination to be performed."
        )
    if zone is None and host is None and node is None:
        zone = default_zone or None  # an admin's host choice is not narrowed by it
    return Destination(zone=zone, host=host, node=node)


def scheduler_request(
    session: Session,
    destination: Destination,
    hints: dict[str, list[str]],
    *,
    count: int,
    vcpus: int,
    memory_mb: int,
    root_gb: int,
) -> scheduler.Request:
    """What the scheduler places; the hints' instances are looked up in ``session``, the cell
    the servers go to."""
    return scheduler.Request(
        count=count,
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        availability_zone=destination.zone,
        host=destination.host,
        node=destination.node,
        same_host=scheduler_hints.hosts_of(session, hints, "same_host"),
        different_host=scheduler_hints.hosts_of(session, hints, "different_host") or frozenset(),
    )
