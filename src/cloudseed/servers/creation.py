"""Creating servers: resolve what the request names and write the records (the route then
starts the builds).

``create_servers`` is a coordinator (docs/architecture.md, "Transactions"): it opens its own
transactions, one per database, because a create spans two. The API database is written first
(instance mappings, address allocations), then the cell database (the instances themselves).
If the cell write fails, the API rows are removed again in a compensating transaction, so a
failed create leaves nothing behind. Both transactions are committed before it returns, so
the builds the route starts find the instances.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import string
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from cloudseed.cells.models import InstanceMapping
from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.errors import Forbidden, InvalidInput
from cloudseed.flavors import service as flavors
from cloudseed.flavors.errors import FlavorNotFound
from cloudseed.hosts import scheduler
from cloudseed.hosts.errors import NoValidHost
from cloudseed.images import service as images
from cloudseed.images.access import Viewer
from cloudseed.keypairs import service as keypairs
from cloudseed.keypairs.errors import KeypairNotFound
from cloudseed.networks import service as networks
from cloudseed.networks.errors import NetworkNotFound
from cloudseed.quotas import service as quotas
from cloudseed.servers import action_log, history, personality, queue, states
from cloudseed.servers import quota as usage
from cloudseed.servers.errors import InvalidKeyName
from cloudseed.servers.history import Actor
from cloudseed.servers.hostnames import sanitize_hostname
from cloudseed.servers.models import (
    FixedIP,
    Instance,
    InstanceExtra,
    InstanceMetadata,
    InstanceSystemMetadata,
    Port,
)
from cloudseed.settings import Settings


@dataclass(frozen=True)
class CreateRequest:
    name: str
    flavor_ref: str
    image_ref: str
    actor: Actor
    roles: frozenset[str]
    key_name: str | None = None
    user_data: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    config_drive: bool = False
    hostname: str | None = None
    description: str | None = None
    availability_zone: str | None = None
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    # None or "auto": every registered network's first one; "none": no port.
    networks: list[dict[str, Any]] | str | None = None
    # The request's max_count; as many as the quota allows down to min_count are created.
    count: int = 1
    min_count: int = 1
    admin_pass: str | None = None
    # Personality files (path, base64 text): checked here, then carried to the build in its
    # operation's payload, which drops them when the operation ends.
    files: personality.Encoded = ()
    # An admin's choice of compute host and node (2.74), also "zone:host:node" in the zone.
    requested_host: str | None = None
    requested_node: str | None = None


@dataclass(frozen=True)
class Created:
    uuids: list[str]
    reservation_id: str
    admin_pass: str
    action_ids: dict[str, int]


def generate_password(length: int = 12) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def keypair_snapshot(keypair: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": keypair.name,
            "user_id": keypair.user_id,
            "fingerprint": keypair.fingerprint,
            "public_key": keypair.public_key,
            "type": keypair.type,
            "created_at": keypair.created_at.isoformat(),
        }
    ]


def keypair_of(session: Session, *, user_id: str, key_name: str) -> list[dict[str, Any]]:
    """The caller's key pair as an instance keeps it (API database); unknown -> 400 as in
    Nova."""
    try:
        return keypair_snapshot(keypairs.get_keypair(session, user_id=user_id, name=key_name))
    except KeypairNotFound as exc:
        raise InvalidKeyName() from exc


def _image_viewer(request: CreateRequest) -> Viewer:
    """The caller as the image rules see them: its project's private images are its own."""
    return Viewer(
        project_id=request.actor.project_id,
        is_admin="admin" in request.roles,
        roles=request.roles,
    )


def create_servers(
    api_db: Database, cells: CellDatabases, request: CreateRequest, *, settings: Settings
) -> Created:
    quota = settings.quota
    force_config_drive = settings.default.force_config_drive
    destination = _destination(request, default_zone=settings.default.default_schedule_zone)
    reservation_id = "r-" + secrets.token_hex(4)
    admin_pass = request.admin_pass or generate_password()
    cell_id = cells.default_cell()
    project_id, user_id = request.actor.project_id, request.actor.user_id
    with api_db.write() as session:
        keypair = (
            keypair_of(session, user_id=request.actor.user_id, key_name=request.key_name)
            if request.key_name
            else []
        )
        personality.check_limits(
            session,
            request.files,
            project_id=request.actor.project_id,
            user_id=request.actor.user_id,
            quota=quota,
        )
        try:
            flavor = flavors.snapshot(flavors.get_flavor(session, request.flavor_ref))
        except FlavorNotFound as exc:  # a request naming a missing flavor: 400 in Nova
            raise InvalidInput(str(exc)) from exc
        image = images.bootable_image(session, request.image_ref, viewer=_image_viewer(request))
        image_props = images.properties_of(image)
        vcpus, memory_mb = int(str(flavor["vcpus"])), int(str(flavor["ram"]))
        root_gb = int(str(flavor["disk"]))
        images.check_flavor_fits(image, root_gb=root_gb, memory_mb=memory_mb)
        # The quota decides how many before anything is allocated (names, ports, rows).
        limits = quotas.instance_limits(session, quota, project_id=project_id, user_id=user_id)
        count = quotas.allowed_instances(
            limits,
            project_usage=usage.count(cells, project_id=project_id),
            user_usage=usage.count(cells, project_id=project_id, user_id=user_id)
            if limits.user is not None
            else None,
            vcpus=vcpus,
            memory_mb=memory_mb,
            min_count=request.min_count,
            max_count=request.count,
        )
        uuids = [str(uuid.uuid4()) for _ in range(count)]
        try:
            ports = {u: _plan_ports(session, request.networks, u) for u in uuids}
        except NetworkNotFound as exc:  # 400 in Nova too
            raise InvalidInput(str(exc)) from exc
        for u in uuids:
            session.add(
                InstanceMapping(
                    instance_uuid=u,
                    cell_id=cell_id,
                    project_id=request.actor.project_id,
                    user_id=request.actor.user_id,
                )
            )
        image_uuid = image.uuid
    config_drive = (
        request.config_drive
        or force_config_drive
        or image_props.get("img_config_drive") == "mandatory"
    )
    cell = cells.by_id(cell_id)
    ports = _unique_macs(cell, ports)
    action_ids: dict[str, int] = {}
    try:
        with cell.write() as session:
            try:
                placements: list[scheduler.Placement | None] = list(
                    scheduler.choose_hosts(
                        session,
                        scheduler.Request(
                            count=count,
                            vcpus=vcpus,
                            memory_mb=memory_mb,
                            root_gb=root_gb,
                            availability_zone=destination.zone,
                            host=destination.host,
                            node=destination.node,
                        ),
                        settings=settings,
                        usage=usage.by_host,
                    )
                )
                no_host: NoValidHost | None = None
            except NoValidHost as exc:
                # As in Nova: the servers exist, in ERROR, with the scheduler's fault.
                placements, no_host = [None] * count, exc
            for index, u in enumerate(uuids):
                placement = placements[index]
                name = request.name if count == 1 else f"{request.name}-{index + 1}"
                hostname = request.hostname or sanitize_hostname(name, default=f"Server-{u}")
                if request.hostname and count > 1:
                    hostname = f"{request.hostname}-{index + 1}"
                session.add(
                    Instance(
                        uuid=u,
                        display_name=name,
                        display_description=request.description,
                        hostname=hostname,
                        project_id=request.actor.project_id,
                        user_id=request.actor.user_id,
                        image_ref=image_uuid,
                        flavor_id=str(flavor["id"]),
                        vm_state=states.BUILDING if placement else states.ERROR,
                        task_state=states.SCHEDULING if placement else None,
                        power_state=states.NOSTATE,
                        host=placement.host if placement else None,
                        node=placement.node if placement else None,
                        vcpus=vcpus,
                        memory_mb=memory_mb,
                        root_gb=root_gb,
                        key_name=request.key_name,
                        key_data=keypair[0]["public_key"] if keypair else None,
                        user_data=request.user_data,
                        config_drive="True" if config_drive else "",
                        launch_index=index,
                        reservation_id=reservation_id,
                        availability_zone=request.availability_zone,
                        access_ip_v4=request.access_ip_v4,
                        access_ip_v6=request.access_ip_v6,
                    )
                )
                session.flush()
                session.add(
                    InstanceExtra(
                        instance_uuid=u,
                        keypairs=json.dumps(keypair),
                        flavor=json.dumps(flavor),
                        fault=_fault(no_host) if no_host else None,
                    )
                )
                for key, value in _system_metadata(request, image_props).items():
                    session.add(InstanceSystemMetadata(instance_uuid=u, key=key, value=value))
                for key, value in request.metadata.items():
                    session.add(InstanceMetadata(instance_uuid=u, key=key, value=value))
                for plan in ports[u]:
                    _add_port(session, u, plan)
                action_ids[u] = action_log.start(
                    session,
                    instance_uuid=u,
                    action="create",
                    actor=request.actor,
                    event="compute__do_build_and_run_instance",
                )
                if placement is None:
                    action_log.finish(
                        session,
                        action_id=action_ids[u],
                        event="compute__do_build_and_run_instance",
                        error=no_host.message if no_host else None,
                    )
                else:
                    queue.enqueue(
                        session,
                        instance_uuid=u,
                        kind="build",
                        host=placement.host,
                        action_id=action_ids[u],
                        payload=_build_payload(admin_pass, request.files),
                    )
                history.record(
                    session,
                    instance_uuid=u,
                    field="key_pair",
                    action="create",
                    actor=request.actor,
                    old=None,
                    new=history.describe_key(keypair),
                )
                history.record(
                    session,
                    instance_uuid=u,
                    field="user_data",
                    action="create",
                    actor=request.actor,
                    old=None,
                    new=history.describe_user_data(request.user_data),
                )
            if quota.recheck_quota:
                # Others may have created since we counted; this count includes them and us.
                session.flush()
                quotas.recheck_instances(
                    limits,
                    project_usage=_usage_with(session, cells, cell_id, project_id),
                    user_usage=_usage_with(session, cells, cell_id, project_id, user_id)
                    if limits.user is not None
                    else None,
                    vcpus=vcpus,
                    memory_mb=memory_mb,
                    requested=count,
                )
    except BaseException:
        with api_db.write() as session:
            session.execute(delete(InstanceMapping).where(InstanceMapping.instance_uuid.in_(uuids)))
            for u in uuids:
                networks.release(session, instance_uuid=u)
        raise
    return Created(
        uuids=uuids, reservation_id=reservation_id, admin_pass=admin_pass, action_ids=action_ids
    )


@dataclass(frozen=True)
class Destination:
    zone: str | None
    host: str | None
    node: str | None


def _destination(request: CreateRequest, *, default_zone: str) -> Destination:
    """Where the request asks its servers to go: ``availability_zone`` as "zone",
    "zone:host", "zone::node" or "zone:host:node" (the host and node parts for admins, as
    Nova's forced_host policy), or 2.74's ``host`` and ``hypervisor_hostname`` (admins)."""
    zone, host, node = request.availability_zone, request.requested_host, request.requested_node
    if zone and ":" in zone:
        parts = zone.split(":", 2)
        zone = parts[0] or None
        host = parts[1] or None if len(parts) > 1 else None
        node = parts[2] or None if len(parts) > 2 else None
        if (host or node) and "admin" not in request.roles:
            raise Forbidden(
                "Policy doesn't allow os_compute_api:servers:create:forced_host to be performed."
            )
    if (request.requested_host or request.requested_node) and "admin" not in request.roles:
        raise Forbidden(
            "Policy doesn't allow compute:servers:create:requested_destination to be performed."
        )
    if zone is None and host is None and node is None:
        zone = default_zone or None  # an admin's host choice is not narrowed by it
    return Destination(zone=zone, host=host, node=node)


def _build_payload(admin_pass: str, files: personality.Encoded) -> dict[str, Any]:
    payload: dict[str, Any] = {"admin_password": admin_pass}
    if files:
        payload["files"] = [list(f) for f in files]
    return payload


def _fault(exc: NoValidHost) -> str:
    return json.dumps(
        {
            "code": 500,
            "message": exc.message,
            "created": utcnow().isoformat(),
            "details": "",
        },
        sort_keys=True,
    )


def _usage_with(
    session: Session,
    cells: CellDatabases,
    cell_id: int,
    project_id: str,
    user_id: str | None = None,
) -> quotas.Usage:
    """Usage with this cell counted in the writing session (our inserts included)."""
    return usage.add(
        usage.count_in(session, project_id=project_id, user_id=user_id),
        usage.count(cells, project_id=project_id, user_id=user_id, except_cell=cell_id),
    )


def _system_metadata(request: CreateRequest, image_props: dict[str, str]) -> dict[str, str]:
    values = {"boot_roles": ",".join(sorted(request.roles))}
    values.update({f"image_{k}": str(v) for k, v in image_props.items()})
    return values


def _unique_macs(
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


def _plan_ports(
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


def _add_port(session: Any, instance_uuid: str, plan: networks.PortPlan) -> None:
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


__all__ = ["CreateRequest", "Created", "create_servers", "keypair_of"]
