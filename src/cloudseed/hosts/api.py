"""``/v2.1/os-services`` and ``/v2.1/os-hypervisors``: the compute hosts, as Nova shows them
(admin only, Nova's default policy).

A service is ``up`` while its agent's last heartbeat is newer than ``service_down_time`` and it
is not forced down; ``status`` is ``enabled`` or ``disabled``. Before 2.53 services and
hypervisors are named by integer ids and changed through ``PUT /os-services/{enable, disable,
disable-log-reason, force-down}`` with ``host`` and ``binary`` in the body (force-down from
2.11); from 2.53 by uuids, changed with ``PUT /os-services/{uuid}``. 2.88 drops the resource
counters from the hypervisor views.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.errors import InvalidInput, NotFound
from cloudseed.hosts import schemas
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.hosts.service import BINARY, service_is_up
from cloudseed.web.errors import PolicyNotAuthorized
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import body_of, context_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.state import fragment_of
from cloudseed.web.validation import query_lists

V = APIVersion
UUIDS = V(2, 53)

T = TypeVar("T")


class ServiceNotFound(NotFound):
    def __init__(self, ident: str) -> None:
        super().__init__(f"Service {ident} could not be found.")


class HostNotFound(NotFound):
    def __init__(self, host: str) -> None:
        super().__init__(f"Host {host} could not be found.")


class HypervisorNotFound(NotFound):
    def __init__(self, ident: str) -> None:
        super().__init__(f"Hypervisor with ID '{ident}' could not be found.")


# (session, hosts) -> {host: (vcpus, memory_mb, root_gb, instances)} its live instances use.
HostUsage = Callable[[Session, list[str]], dict[str, tuple[int, int, int, int]]]


@dataclass(frozen=True)
class HostsState:
    """The host routes' fragment of the app's state (``web/state.py``): the cells, and what
    each host's instances use (which the app wires in from the servers, above hosts)."""

    cells: CellDatabases
    host_usage: HostUsage


def _cells(request: Request) -> CellDatabases:
    return fragment_of(request, HostsState).cells


def _admin(request: Request, policy: str) -> None:
    if not context_of(request).is_admin:
        raise PolicyNotAuthorized(policy)


def _time(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _service_view(request: Request, service: Service) -> dict[str, Any]:
    version = version_of(request)
    down_time = settings_of(request).default.service_down_time
    body: dict[str, Any] = {
        "id": service.uuid if version >= UUIDS else service.id,
        "binary": service.binary,
        "host": service.host,
        "zone": service.availability_zone,
        "status": "disabled" if service.disabled else "enabled",
        "state": "up" if service_is_up(service, now=utcnow(), down_time=down_time) else "down",
        "updated_at": _time(service.updated_at),
        "disabled_reason": service.disabled_reason,
    }
    if version >= V(2, 11):
        body["forced_down"] = service.forced_down
    return body


def _each_cell(request: Request) -> list[Database]:
    return _cells(request).all_cells()


async def _in_each_cell(
    request: Request, work: Callable[[Session], T], *, write: bool = False, first: bool = False
) -> list[T]:
    """``work`` in one transaction of each cell in turn, in a worker thread (finding the cells
    reads the API database); with ``first``, up to the first that returns a true value."""

    def run() -> list[T]:
        results = []
        for cell in _each_cell(request):
            results.append(cell.run(work, write=write))
            if first and results[-1]:
                break
        return results

    return await run_in_threadpool(run)


async def list_services(request: Request) -> Response:
    _admin(request, "os_compute_api:os-services:list")
    query = query_lists(request)
    hosts, binaries = query.get("host") or [], query.get("binary") or []
    host = hosts[0] if hosts else None
    binary = binaries[0] if binaries else None

    def read(session: Session) -> list[dict[str, Any]]:
        rows = session.scalars(select(Service).where(Service.deleted == 0).order_by(Service.id))
        return [
            _service_view(request, s)
            for s in rows
            if host in (None, s.host) and binary in (None, s.binary)
        ]

    per_cell = await _in_each_cell(request, read)
    return JSONResponse({"services": [view for views in per_cell for view in views]})


async def _change(request: Request, find: Any, change: Any) -> dict[str, Any] | None:
    """Apply ``change(service)`` to the one service ``find(session)`` returns, in its cell;
    its view, or None when no cell has it."""

    def apply(session: Session) -> dict[str, Any] | None:
        service = find(session)
        if service is None:
            return None
        change(service)
        service.updated_at = utcnow()
        session.flush()
        return _service_view(request, service)

    views = await _in_each_cell(request, apply, write=True, first=True)
    return views[-1] if views else None


async def update_by_action(request: Request) -> Response:
    """Before 2.53: PUT /os-services/{enable,disable,disable-log-reason,force-down}."""
    version = version_of(request)
    action = request.path_params["action"]
    if action not in schemas.LEGACY_ACTIONS:
        raise NotFound("The resource could not be found.")
    if action == "force-down" and version < V(2, 11):
        raise NotFound("The resource could not be found.")
    _admin(request, "os_compute_api:os-services:update")
    body = await body_of(request, schemas.LEGACY_ACTIONS[action])
    host, binary = body["host"], body["binary"]

    def find(session: Session) -> Service | None:
        return session.scalar(
            select(Service).where(
                Service.host == host, Service.binary == binary, Service.deleted == 0
            )
        )

    def change(service: Service) -> None:
        if action == "enable":
            service.disabled, service.disabled_reason = False, None
        elif action in ("disable", "disable-log-reason"):
            service.disabled = True
            service.disabled_reason = body.get("disabled_reason")
        else:
            service.forced_down = bool(body["forced_down"])

    view = await _change(request, find, change)
    if view is None:
        raise HostNotFound(host)
    answer: dict[str, Any] = {"host": host, "binary": binary}
    if action == "force-down":
        answer["forced_down"] = view["forced_down"]
    else:
        answer["status"] = view["status"]
        if action == "disable-log-reason":
            answer["disabled_reason"] = view["disabled_reason"]
    return JSONResponse({"service": answer})


async def update_by_uuid(request: Request) -> Response:
    """From 2.53: PUT /os-services/{uuid} with status, disabled_reason, forced_down."""
    _admin(request, "os_compute_api:os-services:update")
    service_id = request.path_params["action"]
    body = await body_of(request, schemas.UPDATE_V253)
    if "disabled_reason" in body and body.get("status") != "disabled":
        raise InvalidInput("Specifying 'disabled_reason' with status 'enabled' is invalid.")

    def find(session: Session) -> Service | None:
        return session.scalar(
            select(Service).where(Service.uuid == service_id, Service.deleted == 0)
        )

    def change(service: Service) -> None:
        if service.binary != BINARY:
            raise InvalidInput("Updating a non nova-compute service is not supported.")
        if body.get("status") == "enabled":
            service.disabled, service.disabled_reason = False, None
        elif body.get("status") == "disabled":
            service.disabled = True
            service.disabled_reason = body.get("disabled_reason")
        if "forced_down" in body:
            service.forced_down = bool(body["forced_down"])

    view = await _change(request, find, change)
    if view is None:
        raise ServiceNotFound(service_id)
    return JSONResponse({"service": view})


async def delete_service(request: Request) -> Response:
    """Remove a compute service and its node; its agent registers again if it still runs."""
    _admin(request, "os_compute_api:os-services:delete")
    ident = request.path_params["action"]
    by_uuid = version_of(request) >= UUIDS

    column = Service.uuid if by_uuid else Service.id
    value: Any = ident if by_uuid else _int_or_none(ident)

    def delete_in(session: Session) -> bool:
        service = session.scalar(select(Service).where(column == value, Service.deleted == 0))
        if service is None:
            return False
        now = utcnow()
        for node in session.scalars(
            select(ComputeNode).where(
                ComputeNode.service_id == service.id, ComputeNode.deleted == 0
            )
        ):
            node.deleted, node.deleted_at = node.id, now
        service.deleted, service.deleted_at = service.id, now
        return True

    deleted = await _in_each_cell(request, delete_in, write=True, first=True)
    if not (deleted and deleted[-1]):
        raise ServiceNotFound(ident)
    return Response(status_code=204)


async def update_by_action_or_uuid(request: Request) -> Response:
    if version_of(request) >= UUIDS:
        return await update_by_uuid(request)
    return await update_by_action(request)


def _int_or_none(value: str) -> int | None:
    return int(value) if value.isdigit() and len(value) < 10 else None


# -- hypervisors -------------------------------------------------------------------------------


def _hypervisor(
    request: Request, node: ComputeNode, service: Service, used: tuple[int, int, int, int]
) -> dict[str, Any]:
    """The detailed view (the list view is its first four keys)."""
    version = version_of(request)
    down_time = settings_of(request).default.service_down_time
    vcpus_used, memory_used, disk_used, running = used
    body: dict[str, Any] = {
        "id": node.uuid if version >= UUIDS else node.id,
        "hypervisor_hostname": node.hypervisor_hostname,
        "state": "up" if service_is_up(service, now=utcnow(), down_time=down_time) else "down",
        "status": "disabled" if service.disabled else "enabled",
        "host_ip": node.host_ip,
        "hypervisor_type": node.hypervisor_type,
        "hypervisor_version": node.hypervisor_version,
        "service": {
            "host": service.host,
            "id": service.uuid if version >= UUIDS else service.id,
            "disabled_reason": service.disabled_reason,
        },
    }
    if version < V(2, 88):
        body.update(
            vcpus=node.vcpus,
            memory_mb=node.memory_mb,
            local_gb=node.local_gb,
            vcpus_used=vcpus_used,
            memory_mb_used=memory_used,
            local_gb_used=disk_used,
            free_ram_mb=node.memory_mb - memory_used,
            free_disk_gb=node.local_gb - disk_used,
            current_workload=0,
            running_vms=running,
            disk_available_least=node.local_gb - disk_used,
            cpu_info="{}",
        )
    else:
        body["uptime"] = None
    return body


def _hypervisors(request: Request) -> list[dict[str, Any]]:
    usage = fragment_of(request, HostsState).host_usage
    shown = []
    for cell in _each_cell(request):
        with cell.read() as session:
            services = {
                s.id: s for s in session.scalars(select(Service).where(Service.deleted == 0))
            }
            nodes = [
                n
                for n in session.scalars(
                    select(ComputeNode).where(ComputeNode.deleted == 0).order_by(ComputeNode.id)
                )
                if n.service_id in services
            ]
            used = usage(session, [n.host for n in nodes])
            shown += [
                _hypervisor(request, n, services[n.service_id], used.get(n.host, (0, 0, 0, 0)))
                for n in nodes
            ]
    return shown


async def list_hypervisors(request: Request) -> Response:
    _admin(request, "os_compute_api:os-hypervisors:list")
    views = await run_in_threadpool(_hypervisors, request)
    keys = ("id", "hypervisor_hostname", "state", "status")
    return JSONResponse({"hypervisors": [{k: v[k] for k in keys} for v in views]})


async def detail_hypervisors(request: Request) -> Response:
    _admin(request, "os_compute_api:os-hypervisors:list-detail")
    return JSONResponse({"hypervisors": await run_in_threadpool(_hypervisors, request)})


async def show_hypervisor(request: Request) -> Response:
    _admin(request, "os_compute_api:os-hypervisors:show")
    ident = request.path_params["id"]
    views = await run_in_threadpool(_hypervisors, request)
    for view in views:
        if str(view["id"]) == ident:
            return JSONResponse({"hypervisor": view})
    raise HypervisorNotFound(ident)


async def list_aggregates(request: Request) -> Response:
    """cloudseed has no host aggregates: the list is empty (``openstack hypervisor show``
    asks for it to name the host's aggregates)."""
    _admin(request, "os_compute_api:os-aggregates:index")
    return JSONResponse({"aggregates": []})


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [
    Route("/os-services", list_services, methods=["GET"]),
    Route("/os-services/{action}", update_by_action_or_uuid, methods=["PUT"]),
    Route("/os-services/{action}", delete_service, methods=["DELETE"]),
    Route("/os-hypervisors", list_hypervisors, methods=["GET"]),
    Route("/os-hypervisors/detail", detail_hypervisors, methods=["GET"]),
    Route("/os-hypervisors/{id}", show_hypervisor, methods=["GET"]),
    Route("/os-aggregates", list_aggregates, methods=["GET"]),
]
