"""The cell database rows of one new server, added in ``creation.create_servers``'s cell
transaction: the instance and its extra (key set, flavor, the scheduler's fault), its system
metadata, metadata and tags, its planned ports (with their device role tags), the create
action with its build operation (or, when no host was found, the action finished with that
fault), and the first history entries (keys, user data). Nothing here commits: the
coordinator owns the transaction."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert
from sqlalchemy.orm import Session

from cloudseed.db.base import CellBase, utcnow
from cloudseed.flavors.snapshots import FlavorSnapshot
from cloudseed.hosts import scheduler
from cloudseed.hosts.errors import NoValidHost
from cloudseed.networks import service as networks
from cloudseed.servers import states
from cloudseed.servers.creation import destinations, personality, pinning, scheduler_hints
from cloudseed.servers.creation import ports as port_plans
from cloudseed.servers.creation.request import CreateRequest
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.history import bootstrap as history
from cloudseed.servers.hostnames import sanitize_hostname
from cloudseed.servers.lifecycle import queue, security_groups
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.metadata_options import options as metadata_options
from cloudseed.servers.models import (
    FixedIP,
    Instance,
    InstanceActionEvent,
    InstanceExtra,
    InstanceMetadata,
    InstanceSystemMetadata,
    InstanceTag,
)
from cloudseed.servers.system_metadata import SECURITY_GROUPS

BUILD_EVENT = "compute__do_build_and_run_instance"


@dataclass(frozen=True)
class NewServers:
    """What every server of one create request shares, resolved in the API database."""

    request: CreateRequest
    # How many are created (the quota's answer): with more than one, names and requested
    # hostnames get a -N suffix.
    count: int
    reservation_id: str
    admin_pass: str
    flavor: FlavorSnapshot
    vcpus: int
    memory_mb: int
    root_gb: int
    image_uuid: str
    image_props: dict[str, str]
    keypairs: list[dict[str, Any]]  # the key set, key_sets.merge
    config_drive: bool
    destination: destinations.Destination
    metadata_options: str | None = None  # 2.109, as stored (servers/metadata_options/)


def add_instances(
    session: Session,
    servers: NewServers,
    *,
    uuids: list[str],
    placements: list[scheduler.Placement | None],
    no_host: NoValidHost | None,
    ports: dict[str, list[networks.PortPlan]],
) -> dict[str, int]:
    """Add the rows of every new server (``uuids[i]`` placed at ``placements[i]``, or in ERROR
    with ``no_host``'s fault where that is None); returns each one's create action id.

    In three steps whatever the count, so that each step's INSERTs go out batched: the
    instances; then the rows that others refer to by an id (actions, ports); then the rows
    no row refers to, one statement a table (the extra, fixed IPs, build events, metadata,
    system metadata, tags, history), with the build operations left to the transaction's
    next flush. The ORM does not order INSERTs of unrelated rows by their foreign keys
    (there is no relationship() between these models), so the steps are the order.
    (One flush per row took half of a multi-create's CPU.)"""
    session.add_all(
        [
            _instance(servers, uuid=u, index=index, placement=placements[index])
            for index, u in enumerate(uuids)
        ]
    )
    session.flush()
    actor = servers.request.actor
    actions = {
        u: action_log.new_action(instance_uuid=u, action="create", actor=actor) for u in uuids
    }
    session.add_all(actions.values())
    tags = port_plans.requested_tags(servers.request.networks)
    session.add_all(
        [
            port_plans.port_row(u, plan, tags[i] if i < len(tags) else None)
            for u in uuids
            for i, plan in enumerate(ports[u])
        ]
    )
    session.flush()
    plain: defaultdict[type[CellBase], list[dict[str, Any]]] = defaultdict(list)
    changes: list[history.Change] = []
    for index, u in enumerate(uuids):
        _add_dependents(
            session,
            servers,
            plain,
            uuid=u,
            action_id=actions[u].id,
            placement=placements[index],
            no_host=no_host,
            ports=ports[u],
        )
        for model, rows in _plain_rows(servers, uuid=u, has_ports=bool(ports[u])).items():
            plain[model].extend(rows)
        changes.extend(_first_history(servers, uuid=u))
    # One statement a table for every server of the request: the ORM would insert each of
    # these rows on its own (on SQLite it reads each new id back, one row at a time), and
    # nothing here needs their ids or objects.
    # On the session's connection, past the ORM: nothing they refer to is left unflushed (the
    # instances went out above).
    for model, rows in plain.items():
        if rows:
            session.connection().execute(insert(model), rows)
    history.record_now(session, changes)
    return {u: action.id for u, action in actions.items()}


def _instance(
    servers: NewServers, *, uuid: str, index: int, placement: scheduler.Placement | None
) -> Instance:
    request = servers.request
    key_name, key_data = key_sets.first_key(servers.keypairs)
    name = request.name if servers.count == 1 else f"{request.name}-{index + 1}"
    hostname = request.hostname or sanitize_hostname(name, default=f"Server-{uuid}")
    if request.hostname and servers.count > 1:
        hostname = f"{request.hostname}-{index + 1}"
    return Instance(
        uuid=uuid,
        display_name=name,
        display_description=request.description,
        hostname=hostname,
        project_id=request.actor.project_id,
        user_id=request.actor.user_id,
        image_ref=servers.image_uuid,
        flavor_id=servers.flavor.flavorid,
        vm_state=states.BUILDING if placement else states.ERROR,
        task_state=states.SCHEDULING if placement else None,
        power_state=states.NOSTATE,
        host=placement.host if placement else None,
        node=placement.node if placement else None,
        vcpus=servers.vcpus,
        memory_mb=servers.memory_mb,
        root_gb=servers.root_gb,
        key_name=key_name,
        key_data=key_data,
        user_data=request.user_data,
        config_drive="True" if servers.config_drive else "",
        launch_index=index,
        reservation_id=servers.reservation_id,
        # The host's zone once placed, as Nova's conductor records it.
        availability_zone=placement.zone if placement else servers.destination.zone,
        access_ip_v4=request.access_ip_v4,
        access_ip_v6=request.access_ip_v6,
    )


def _add_dependents(
    session: Session,
    servers: NewServers,
    plain: defaultdict[type[CellBase], list[dict[str, Any]]],
    *,
    uuid: str,
    action_id: int,
    placement: scheduler.Placement | None,
    no_host: NoValidHost | None,
    ports: list[networks.PortPlan],
) -> None:
    """The rows of one server that refer to its instance, action or ports (all flushed): as
    ``plain`` rows where nothing refers to them (the extra, the fixed IPs, a placed server's
    started build event), the build operation through the queue; an unplaced server's build
    event is finished with the scheduler's fault (``action_log``, which reads it back)."""
    request = servers.request
    plain[InstanceExtra].append(
        {
            "instance_uuid": uuid,
            "keypairs": json.dumps(servers.keypairs, sort_keys=True),
            "flavor": servers.flavor.document(),
            "fault": _fault(no_host) if no_host else None,
            "keys_generation": 1,
            "keys_boot_generation": 1,
            "block_project_keys": request.block_project_keys,
        }
    )
    plain[FixedIP].extend(port_plans.fixed_ip_row(uuid, plan) for plan in ports)
    if placement is None:
        action_log.add_event(session, action_id=action_id, event=BUILD_EVENT)
        action_log.finish(
            session,
            action_id=action_id,
            event=BUILD_EVENT,
            error=no_host.message if no_host else None,
        )
        return
    plain[InstanceActionEvent].append(
        {"action_id": action_id, "event": BUILD_EVENT, "start_time": utcnow()}
    )
    queue.enqueue(
        session,
        instance_uuid=uuid,
        kind="build",
        host=placement.host,
        action_id=action_id,
        payload=_build_payload(servers.admin_pass, request.files),
    )


def _plain_rows(
    servers: NewServers, *, uuid: str, has_ports: bool
) -> dict[type[CellBase], list[dict[str, Any]]]:
    """The rows of one server that nothing refers to: its system metadata, metadata, tags."""
    request = servers.request
    sysmeta = _system_metadata(servers, has_ports=has_ports)
    return {
        InstanceSystemMetadata: [
            {"instance_uuid": uuid, "key": k, "value": v} for k, v in sysmeta.items()
        ],
        InstanceMetadata: [
            {"instance_uuid": uuid, "key": k, "value": v} for k, v in request.metadata.items()
        ],
        InstanceTag: [{"instance_uuid": uuid, "tag": t} for t in sorted(set(request.tags))],
    }


def _first_history(servers: NewServers, *, uuid: str) -> list[history.Change]:
    """A new server's first history entries: its keys and its user data."""
    actor = servers.request.actor
    return [
        *history.key_changes(
            instance_uuid=uuid, action="create", actor=actor, old=[], new=servers.keypairs
        ),
        history.Change(
            uuid,
            "user_data",
            "create",
            actor,
            None,
            history.describe_user_data(servers.request.user_data),
        ),
    ]


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


def _system_metadata(servers: NewServers, *, has_ports: bool) -> dict[str, str]:
    request, destination = servers.request, servers.destination
    values = {"boot_roles": ",".join(sorted(request.roles))}
    values[SECURITY_GROUPS] = security_groups.initial(request.security_groups, has_ports=has_ports)
    values.update({f"image_{k}": str(v) for k, v in servers.image_props.items()})
    if destination.zone is not None:
        # The zone asked for (or the default schedule zone): Nova's request spec keeps it.
        values[pinning.PINNED_AZ] = destination.zone
    if request.scheduler_hints:
        values[scheduler_hints.SCHEDULER_HINTS] = scheduler_hints.dumps(request.scheduler_hints)
    if servers.metadata_options is not None:
        values[metadata_options.SYSTEM_METADATA_KEY] = servers.metadata_options
    return values


__all__ = ["NewServers", "add_instances"]
