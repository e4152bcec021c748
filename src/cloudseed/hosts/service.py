"""Compute services and nodes: registration, heartbeats and liveness (cell database sessions).

An agent calls ``register`` when it starts and ``heartbeat`` every ``report_interval``; both
are upserts, so a row removed behind an agent's back comes back with its next heartbeat. A
service is up while its last heartbeat is newer than ``service_down_time`` and it is not
forced down; the scheduler places new servers only on enabled services that are up. A host
whose agents all stopped cleanly is marked down at once (``stopped``: its last heartbeat
cleared); only a crash leaves the service up until ``service_down_time`` has passed.
"""

from __future__ import annotations

import datetime as dt
import uuid as uuidlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.compute.interfaces import Capacity
from cloudseed.db.base import utcnow
from cloudseed.hosts.models import ComputeNode, Service

BINARY = "nova-compute"  # the name Nova's clients and tempest look for


def register(
    session: Session,
    *,
    host: str,
    zone: str,
    capacity: Capacity,
    host_ip: str | None = None,
    now: dt.datetime | None = None,
) -> Service:
    """Create or refresh the compute service of ``host`` and its node, marked up now. An
    operator's disable and forced-down flags are kept."""
    now = now or utcnow()
    service = heartbeat(session, host=host, zone=zone, now=now)
    node = session.scalar(
        select(ComputeNode).where(ComputeNode.service_id == service.id, ComputeNode.deleted == 0)
    )
    if node is None:
        node = ComputeNode(
            uuid=str(uuidlib.uuid4()),
            service_id=service.id,
            host=host,
            hypervisor_hostname=capacity.hypervisor_hostname,
            hypervisor_type=capacity.hypervisor_type,
            vcpus=capacity.vcpus,
            memory_mb=capacity.memory_mb,
            local_gb=capacity.disk_gb,
            host_ip=host_ip,
            deleted=0,
        )
        session.add(node)
    else:
        node.hypervisor_hostname = capacity.hypervisor_hostname
        node.hypervisor_type = capacity.hypervisor_type
        node.vcpus, node.memory_mb, node.local_gb = (
            capacity.vcpus,
            capacity.memory_mb,
            capacity.disk_gb,
        )
        node.host_ip = host_ip
        node.updated_at = now
    session.flush()
    return service


def heartbeat(
    session: Session, *, host: str, zone: str = "nova", now: dt.datetime | None = None
) -> Service:
    """Mark the compute service of ``host`` up now (creating it when missing)."""
    now = now or utcnow()
    service = session.scalar(
        select(Service).where(Service.host == host, Service.binary == BINARY, Service.deleted == 0)
    )
    if service is None:
        service = Service(
            uuid=str(uuidlib.uuid4()),
            host=host,
            binary=BINARY,
            topic="compute",
            availability_zone=zone,
            disabled=False,
            forced_down=False,
            report_count=0,
            version=0,
            deleted=0,
        )
        session.add(service)
    service.last_seen_up = now
    service.report_count += 1
    service.updated_at = now
    session.flush()
    return service


def stopped(session: Session, *, host: str, now: dt.datetime | None = None) -> None:
    """Mark the compute service of ``host`` down now: its agents stopped cleanly. The last
    heartbeat is cleared (a service that has not reported since), so the scheduler skips the
    host and ``os-services`` shows it ``down`` without waiting for ``service_down_time``; its
    next ``register`` marks it up again. The operator's flags are kept."""
    now = now or utcnow()
    service = session.scalar(
        select(Service).where(Service.host == host, Service.binary == BINARY, Service.deleted == 0)
    )
    if service is not None:
        service.last_seen_up = None
        service.updated_at = now
        session.flush()


def service_is_up(service: Service, *, now: dt.datetime, down_time: int) -> bool:
    if service.forced_down or service.last_seen_up is None:
        return False
    return now - service.last_seen_up <= dt.timedelta(seconds=down_time)


def live_services(session: Session, *, down_time: int) -> list[Service]:
    """Enabled compute services that are up, in host order."""
    now = utcnow()
    services = session.scalars(
        select(Service)
        .where(Service.binary == BINARY, Service.deleted == 0, Service.disabled.is_(False))
        .order_by(Service.host)
    )
    return [s for s in services if service_is_up(s, now=now, down_time=down_time)]
