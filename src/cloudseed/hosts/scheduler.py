"""Placing new servers on compute hosts (a cell database session, inside the transaction that
inserts the instances).

A host qualifies when its compute service is enabled, up (a heartbeat within
``service_down_time``) and not forced down, is in the requested availability zone, and its node
has room for the flavor: vCPUs times ``initial_cpu_allocation_ratio``, RAM less
``reserved_host_memory_mb`` times ``initial_ram_allocation_ratio``, disk less
``reserved_host_disk_mb`` times ``initial_disk_allocation_ratio``, minus what the host's
instances already use, and it passes the request's ``same_host`` and ``different_host``
hints (Nova's SameHostFilter and DifferentHostFilter). Among those, the one with the most free
RAM wins, as Nova's default RAM weigher spreads instances. On PostgreSQL and MariaDB the
candidate nodes' rows are locked (``FOR UPDATE``) until the transaction ends, so two concurrent
creates cannot both take the last room of a host; SQLite has one writer at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.errors import InvalidInput
from cloudseed.hosts.errors import NoValidHost
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.hosts.service import live_services
from cloudseed.settings import Settings


@dataclass(frozen=True)
class Placement:
    host: str
    node: str
    zone: str  # the host's availability zone, which becomes the instance's


@dataclass(frozen=True)
class Request:
    """What to place: ``count`` instances of one flavor, and an admin's choice of zone, host
    or node (None: any)."""

    count: int
    vcpus: int
    memory_mb: int
    root_gb: int
    availability_zone: str | None = None
    host: str | None = None
    node: str | None = None
    # The hosts of the instances the ``same_host`` hint names (None: no such hint; empty: it
    # names no placed instance, so no host passes, as in Nova), and of ``different_host``'s.
    same_host: frozenset[str] | None = None
    different_host: frozenset[str] = frozenset()

    def allows(self, host: str) -> bool:
        """Nova's SameHostFilter and DifferentHostFilter."""
        if self.same_host is not None and host not in self.same_host:
            return False
        return host not in self.different_host


@dataclass
class Room:
    vcpus: float
    memory_mb: float
    disk_gb: float

    def fits(self, r: Request) -> bool:
        return self.vcpus >= r.vcpus and self.memory_mb >= r.memory_mb and self.disk_gb >= r.root_gb

    def take(self, r: Request) -> None:
        self.vcpus -= r.vcpus
        self.memory_mb -= r.memory_mb
        self.disk_gb -= r.root_gb


# (vcpus, memory_mb, root_gb, instances) the instances of each of the given hosts use.
UsageReader = Callable[[Session, list[str]], dict[str, tuple[int, int, int, int]]]


def zones(session: Session) -> set[str]:
    """The availability zones of enabled compute services (Nova's "available" zones)."""
    return set(
        session.scalars(
            select(Service.availability_zone).where(
                Service.deleted == 0, Service.disabled.is_(False)
            )
        )
    )


def choose_hosts(
    session: Session, request: Request, *, settings: Settings, usage: UsageReader
) -> list[Placement]:
    """One placement per instance, or NoValidHost when they do not all fit; a requested zone
    that no enabled host is in is Nova's 400."""
    d = settings.default
    if request.availability_zone is not None and request.availability_zone not in zones(session):
        raise InvalidInput("The requested availability zone is not available")
    services = [
        s
        for s in live_services(session, down_time=d.service_down_time)
        if request.availability_zone in (None, s.availability_zone)
        and request.host in (None, s.host)
        and request.allows(s.host)
    ]
    zone_of = {s.id: s.availability_zone for s in services}
    if not services:
        raise NoValidHost()
    query = (
        select(ComputeNode)
        .where(
            ComputeNode.service_id.in_([s.id for s in services]),
            ComputeNode.deleted == 0,
        )
        .order_by(ComputeNode.id)
    )
    if request.node is not None:
        query = query.where(ComputeNode.hypervisor_hostname == request.node)
    if session.bind is not None and session.bind.dialect.name != "sqlite":
        query = query.with_for_update()
    nodes = list(session.scalars(query))
    used = usage(session, [n.host for n in nodes])
    rooms = {}
    for node in nodes:
        vcpus, memory_mb, root_gb, _count = used.get(node.host, (0, 0, 0, 0))
        rooms[node.id] = (
            node,
            Room(
                vcpus=node.vcpus * d.initial_cpu_allocation_ratio - vcpus,
                memory_mb=(node.memory_mb - d.reserved_host_memory_mb)
                * d.initial_ram_allocation_ratio
                - memory_mb,
                disk_gb=(node.local_gb - d.reserved_host_disk_mb / 1024)
                * d.initial_disk_allocation_ratio
                - root_gb,
            ),
        )
    placements = []
    for _ in range(request.count):
        fitting = [
            (room.memory_mb, -node.id, node, room)
            for node, room in rooms.values()
            if room.fits(request)
        ]
        if not fitting:
            raise NoValidHost()
        *_, node, room = max(fitting, key=lambda item: (item[0], item[1]))
        room.take(request)
        placements.append(
            Placement(host=node.host, node=node.hypervisor_hostname, zone=zone_of[node.service_id])
        )
    return placements
