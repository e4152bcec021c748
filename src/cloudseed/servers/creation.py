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

import json
import secrets
import string
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from cloudseed.cells.models import InstanceMapping
from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.errors import InvalidInput
from cloudseed.flavors import service as flavors
from cloudseed.flavors.errors import FlavorNotFound
from cloudseed.hosts import scheduler
from cloudseed.hosts.errors import NoValidHost
from cloudseed.images import service as images
from cloudseed.images.access import Viewer
from cloudseed.networks import service as networks
from cloudseed.networks.errors import NetworkNotFound
from cloudseed.quotas import service as quotas
from cloudseed.servers import (
    action_log,
    destinations,
    edits,
    history,
    key_sets,
    live_keys,
    personality,
    pinning,
    port_plans,
    queue,
    scheduler_hints,
    security_groups,
    states,
)
from cloudseed.servers import quota as usage
from cloudseed.servers.history import Actor
from cloudseed.servers.hostnames import sanitize_hostname
from cloudseed.servers.key_sets import KeyRequest
from cloudseed.servers.models import (
    Instance,
    InstanceExtra,
    InstanceMetadata,
    InstanceSystemMetadata,
)
from cloudseed.servers.system_keys import SECURITY_GROUPS
from cloudseed.settings import Settings


@dataclass(frozen=True)
class CreateRequest:
    name: str
    flavor_ref: str
    image_ref: str
    actor: Actor
    roles: frozenset[str]
    key_name: str | None = None
    # 2.106: the server's own keys (key_name is the same as a one-element list), and whether
    # it opts out of its project's keys.
    key_names: tuple[KeyRequest, ...] | None = None
    block_project_keys: bool = False
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
    # ``os:scheduler_hints`` as kept (servers/scheduler_hints.py).
    scheduler_hints: dict[str, list[str]] = field(default_factory=dict)
    # Security group names, checked (servers/security_groups.py); none: "default".
    security_groups: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Created:
    uuids: list[str]
    reservation_id: str
    admin_pass: str
    action_ids: dict[str, int]


def generate_password(length: int = 12) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


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
    destination = destinations.parse(
        request.availability_zone,
        requested_host=request.requested_host,
        requested_node=request.requested_node,
        admin="admin" in request.roles,
        default_zone=settings.default.default_schedule_zone,
    )
    reservation_id = "r-" + secrets.token_hex(4)
    admin_pass = request.admin_pass or generate_password()
    cell_id = cells.default_cell()
    project_id, user_id = request.actor.project_id, request.actor.user_id
    with api_db.write() as session:
        keypairs = _key_set(session, request)
        edits.check_metadata_items(
            quotas.metadata_items_limit(session, project_id=project_id, user_id=user_id),
            request.metadata,
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
            ports = {u: port_plans.plan(session, request.networks, u) for u in uuids}
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
    key_name, key_data = key_sets.first_key(keypairs)
    config_drive = (
        request.config_drive
        or force_config_drive
        or image_props.get("img_config_drive") == "mandatory"
    )
    cell = cells.by_id(cell_id)
    ports = port_plans.unique_macs(cell, ports)
    action_ids: dict[str, int] = {}
    try:
        with cell.write() as session:
            try:
                placements: list[scheduler.Placement | None] = list(
                    scheduler.choose_hosts(
                        session,
                        destinations.scheduler_request(
                            session,
                            destination,
                            request.scheduler_hints,
                            count=count,
                            vcpus=vcpus,
                            memory_mb=memory_mb,
                            root_gb=root_gb,
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
                        key_name=key_name,
                        key_data=key_data,
                        user_data=request.user_data,
                        config_drive="True" if config_drive else "",
                        launch_index=index,
                        reservation_id=reservation_id,
                        # The host's zone once placed, as Nova's conductor records it.
                        availability_zone=placement.zone if placement else destination.zone,
                        access_ip_v4=request.access_ip_v4,
                        access_ip_v6=request.access_ip_v6,
                    )
                )
                session.flush()
                session.add(
                    InstanceExtra(
                        instance_uuid=u,
                        keypairs=json.dumps(keypairs, sort_keys=True),
                        flavor=json.dumps(flavor),
                        fault=_fault(no_host) if no_host else None,
                        keys_generation=1,
                        keys_boot_generation=1,
                        block_project_keys=request.block_project_keys,
                    )
                )
                sysmeta = _system_metadata(request, image_props, destination, bool(ports[u]))
                for key, value in sysmeta.items():
                    session.add(InstanceSystemMetadata(instance_uuid=u, key=key, value=value))
                for key, value in request.metadata.items():
                    session.add(InstanceMetadata(instance_uuid=u, key=key, value=value))
                for plan in ports[u]:
                    port_plans.add(session, u, plan)
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
                history.record_keys(
                    session,
                    instance_uuid=u,
                    action="create",
                    actor=request.actor,
                    old=[],
                    new=keypairs,
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


def _key_set(session: Session, request: CreateRequest) -> list[dict[str, Any]]:
    """The new servers' keys (API database): the caller's key pairs the request names, then
    the project's keys unless the request blocks them; unknown names are Nova's 400."""
    requests = request.key_names
    if requests is None:
        requests = (KeyRequest(name=request.key_name),) if request.key_name else ()
    own = live_keys.own_entries(session, user_id=request.actor.user_id, requests=requests)
    project = (
        []
        if request.block_project_keys
        else live_keys.project_entries(session, request.actor.project_id)
    )
    return key_sets.merge(own, project)


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


def _system_metadata(
    request: CreateRequest,
    image_props: dict[str, str],
    destination: destinations.Destination,
    has_ports: bool,
) -> dict[str, str]:
    values = {"boot_roles": ",".join(sorted(request.roles))}
    values[SECURITY_GROUPS] = security_groups.initial(request.security_groups, has_ports=has_ports)
    values.update({f"image_{k}": str(v) for k, v in image_props.items()})
    if destination.zone is not None:
        # The zone asked for (or the default schedule zone): Nova's request spec keeps it.
        values[pinning.PINNED_AZ] = destination.zone
    if request.scheduler_hints:
        values[scheduler_hints.SCHEDULER_HINTS] = scheduler_hints.dumps(request.scheduler_hints)
    return values


__all__ = ["CreateRequest", "Created", "create_servers"]
