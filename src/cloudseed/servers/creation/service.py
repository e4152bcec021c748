"""Creating servers: resolve what the request names and write the records (the route then
starts the builds).

``create_servers`` is a coordinator (docs/architecture.md, "Transactions"): it opens its own
transactions, one per database, because a create spans two. The API database is written first
(instance mappings, address allocations), then the cell database (the instances themselves,
each one's rows added by ``creation.rows``). If the cell write fails, the API rows are
removed again in a compensating transaction, so a failed create leaves nothing behind. Both
transactions are committed before it returns, so the builds the route starts find the
instances.
"""

from __future__ import annotations

import secrets
import string
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from cloudseed.cells.models import InstanceMapping
from cloudseed.cells.service import CellDatabases, default_cell
from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.errors import InvalidInput
from cloudseed.flavors import service as flavors
from cloudseed.flavors.errors import FlavorNotFound
from cloudseed.flavors.snapshots import FlavorSnapshot
from cloudseed.hosts import scheduler
from cloudseed.hosts.errors import NoValidHost
from cloudseed.images import service as images
from cloudseed.images.visibility import Viewer
from cloudseed.networks import service as networks
from cloudseed.networks.errors import AddressTaken, NetworkNotFound
from cloudseed.quotas import service as quotas
from cloudseed.servers import quota as usage
from cloudseed.servers.creation import destinations, personality, zero_disk
from cloudseed.servers.creation import ports as port_plans
from cloudseed.servers.creation import rows as new_instance_rows
from cloudseed.servers.creation.request import CreateRequest
from cloudseed.servers.history import bootstrap as history
from cloudseed.servers.lifecycle import edits
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys import store as live_keys
from cloudseed.servers.live_keys.sets import KeyRequest
from cloudseed.servers.metadata_options import store as metadata_options_store
from cloudseed.settings import QuotaSection, Settings


@dataclass(frozen=True)
class Created:
    uuids: list[str]
    reservation_id: str
    admin_pass: str
    action_ids: dict[str, int]


@dataclass(frozen=True)
class _Admission:
    """What a create may make, read and checked in the API database before anything is
    allocated."""

    keypairs: list[dict[str, Any]]
    flavor: FlavorSnapshot
    image_uuid: str
    image_props: dict[str, str]
    vcpus: int
    memory_mb: int
    root_gb: int
    limits: quotas.InstanceLimits
    count: int
    cell_id: int  # where the new servers go
    metadata_options: str | None = None  # as stored: the request's over the project's defaults


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
    """Check the request, reserve its uuids and addresses in the API database, then write the
    servers' rows in the default cell (placed by the scheduler; in ERROR with its fault when no
    host fits). A failed cell write takes the reservation back."""
    quota = settings.quota
    destination = destinations.parse(
        request.availability_zone,
        requested_host=request.requested_host,
        requested_node=request.requested_node,
        admin="admin" in request.roles,
        default_zone=settings.default.default_schedule_zone,
    )
    reservation_id = "r-" + secrets.token_hex(4)
    admin_pass = request.admin_pass or generate_password()
    admitted, uuids, ports = _admit_and_reserve(api_db, cells, request, quota)
    count, cell_id = admitted.count, admitted.cell_id
    config_drive = (
        request.config_drive
        or settings.default.force_config_drive
        or admitted.image_props.get("img_config_drive") == "mandatory"
    )
    new_servers = new_instance_rows.NewServers(
        request=request,
        count=count,
        reservation_id=reservation_id,
        admin_pass=admin_pass,
        flavor=admitted.flavor,
        vcpus=admitted.vcpus,
        memory_mb=admitted.memory_mb,
        root_gb=admitted.root_gb,
        image_uuid=admitted.image_uuid,
        image_props=admitted.image_props,
        keypairs=admitted.keypairs,
        config_drive=config_drive,
        destination=destination,
        metadata_options=admitted.metadata_options,
    )
    cell = cells.by_id(cell_id)
    ports = port_plans.unique_macs(cell, ports)

    def add_instances(session: Session) -> dict[str, int]:
        placements, no_host = _placements(
            session, destination, request, admitted, settings=settings
        )
        history.new_instances(session, uuids)
        action_ids = new_instance_rows.add_instances(
            session,
            new_servers,
            uuids=uuids,
            placements=placements,
            no_host=no_host,
            ports=ports,
        )
        if quota.recheck_quota and not admitted.limits.unlimited:
            _recheck_quota(session, cells, cell_id, request, admitted)
        return action_ids

    try:
        action_ids = cell.run(add_instances, write=True)
    except BaseException:
        api_db.run(partial(_unreserve, uuids=uuids), write=True)
        raise
    return Created(
        uuids=uuids, reservation_id=reservation_id, admin_pass=admin_pass, action_ids=action_ids
    )


def _placements(
    session: Session,
    destination: destinations.Destination,
    request: CreateRequest,
    admitted: _Admission,
    *,
    settings: Settings,
) -> tuple[list[scheduler.Placement | None], NoValidHost | None]:
    """A host for each new server, or none and the scheduler's fault: as in Nova, the servers
    exist then, in ERROR."""
    try:
        chosen = scheduler.choose_hosts(
            session,
            destinations.scheduler_request(
                session,
                destination,
                request.scheduler_hints,
                count=admitted.count,
                vcpus=admitted.vcpus,
                memory_mb=admitted.memory_mb,
                root_gb=admitted.root_gb,
            ),
            settings=settings,
            usage=usage.by_host,
        )
    except NoValidHost as exc:
        return [None] * admitted.count, exc
    placements: list[scheduler.Placement | None] = list(chosen)
    return placements, None


def _recheck_quota(
    session: Session,
    cells: CellDatabases,
    cell_id: int,
    request: CreateRequest,
    admitted: _Admission,
) -> None:
    """Others may have created since ``_admit`` counted: count again, with this create's own
    rows flushed, and refuse if the limits no longer hold (``[quota] recheck_quota``)."""
    project_id, user_id = request.actor.project_id, request.actor.user_id
    session.flush()
    quotas.recheck_instances(
        admitted.limits,
        project_usage=_usage_with(session, cells, cell_id, project_id),
        user_usage=_usage_with(session, cells, cell_id, project_id, user_id)
        if admitted.limits.user is not None
        else None,
        vcpus=admitted.vcpus,
        memory_mb=admitted.memory_mb,
        requested=admitted.count,
    )


# Two creates on one network at once pick the same lowest free addresses; the one whose
# reservation loses is run again, reading what the winner committed (it waited for it).
RESERVE_ATTEMPTS = 5


def _admit_and_reserve(
    api_db: Database, cells: CellDatabases, request: CreateRequest, quota: QuotaSection
) -> tuple[_Admission, list[str], dict[str, list[networks.PortPlan]]]:
    """The request admitted (``_admit``), then the new servers' uuids, their instance mappings
    and their ports' addresses, in one API database transaction (each transaction costs a
    create as much as several of its reads), run again when a concurrent create took an
    address first (or the database rolled it back to break a deadlock)."""

    def once(
        session: Session,
    ) -> tuple[_Admission, list[str], dict[str, list[networks.PortPlan]]]:
        admitted = _admit(session, cells, request, quota)
        uuids = [str(uuid.uuid4()) for _ in range(admitted.count)]
        try:
            ports = port_plans.plan_all(session, request.networks, uuids)
        except NetworkNotFound as exc:  # 400 in Nova too
            raise InvalidInput(str(exc)) from exc
        session.add_all(
            [
                InstanceMapping(
                    instance_uuid=u,
                    cell_id=admitted.cell_id,
                    project_id=request.actor.project_id,
                    user_id=request.actor.user_id,
                )
                for u in uuids
            ]
        )
        return admitted, uuids, ports

    return api_db.run(once, write=True, attempts=RESERVE_ATTEMPTS, lost_to=(AddressTaken,))


def _unreserve(session: Session, *, uuids: list[str]) -> None:
    """Undo ``_reserve`` (the cell's write failed): no mappings, no addresses."""
    session.execute(delete(InstanceMapping).where(InstanceMapping.instance_uuid.in_(padded(uuids))))
    for u in uuids:
        networks.release(session, instance_uuid=u)


def _admit(
    session: Session, cells: CellDatabases, request: CreateRequest, quota: QuotaSection
) -> _Admission:
    """The request's keys, flavor and image resolved, its metadata and files within limits,
    and how many servers the quota allows (the usage counted in every cell)."""
    project_id, user_id = request.actor.project_id, request.actor.user_id
    keypairs = _key_set(session, request)
    # Every limit of the project and the user, read once (the metadata items' among them).
    limits = quotas.instance_limits(session, quota, project_id=project_id, user_id=user_id)
    edits.check_metadata_items(limits.limit_of("metadata_items"), request.metadata)
    personality.check_limits(
        session, request.files, project_id=project_id, user_id=user_id, quota=quota
    )
    try:
        flavor = flavors.snapshot(flavors.get_flavor(session, request.flavor_ref))
    except FlavorNotFound as exc:  # a request naming a missing flavor: 400 in Nova
        raise InvalidInput(str(exc)) from exc
    image = images.bootable_image(session, request.image_ref, viewer=_image_viewer(request))
    vcpus, memory_mb, root_gb = flavor.vcpus, flavor.memory_mb, flavor.root_gb
    images.check_flavor_fits(image, root_gb=root_gb, memory_mb=memory_mb)
    # After the image's checks, as in Nova.
    zero_disk.refuse_zero_disk_flavor_unless_admin(root_gb=root_gb, admin="admin" in request.roles)
    # The quota decides how many before anything is allocated (names, ports, rows).
    count = (
        request.count
        if limits.unlimited
        else quotas.allowed_instances(
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
    )
    return _Admission(
        keypairs=keypairs,
        flavor=flavor,
        image_uuid=image.uuid,
        image_props=images.properties_of(image),
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        limits=limits,
        count=count,
        metadata_options=metadata_options_store.for_new_server(
            session, project_id, request.metadata_options
        ),
        cell_id=default_cell(session),
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


__all__ = ["CreateRequest", "Created", "create_servers"]
