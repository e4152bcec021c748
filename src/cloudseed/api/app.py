"""The compute API application factory: the lifespan that opens what requests share, the
auth middleware, every domain's routes, and the error handlers that turn errors into Nova
faults (``web/faults.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

from sqlalchemy import text
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route

from cloudseed.agent.factory import make_agent
from cloudseed.api import keystone_stand_in, versions
from cloudseed.api.auth import KeystoneMiddleware, NoAuthMiddleware
from cloudseed.api.edge import ComputeEdge
from cloudseed.api.image_use import image_in_use
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import Driver
from cloudseed.configdrive import api as configdrive_api
from cloudseed.configdrive.api import ConfigDriveState
from cloudseed.configdrive.service import DriveBuilder
from cloudseed.db.engines import Database
from cloudseed.errors import CloudseedError
from cloudseed.flavors import api as flavors_api
from cloudseed.hostkeys import api as hostkeys_api
from cloudseed.hosts import api as hosts_api
from cloudseed.hosts.api import HostsState
from cloudseed.identity import api as identity_api
from cloudseed.identity.api import IdentityState
from cloudseed.identity.keyring import Keyring
from cloudseed.images import api as images_api
from cloudseed.images.glance_api import ImagesState
from cloudseed.keypairs import api as keypairs_api
from cloudseed.networks import api as networks_api
from cloudseed.nocloud import api as nocloud_api
from cloudseed.quotas import api as quotas_api
from cloudseed.quotas.api import QuotasState
from cloudseed.servers import api as servers_api
from cloudseed.servers import quota as server_quota
from cloudseed.servers.api.requests import ServersState
from cloudseed.servers.lifecycle.service import Servers
from cloudseed.settings import Settings
from cloudseed.types import ASGIApp, Scope
from cloudseed.web.errors import MethodNotAllowed, ResourceNotFound
from cloudseed.web.faults import fault_parts, is_glance_path
from cloudseed.web.links import base_url
from cloudseed.web.requests import api_db_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.state import WebState, lifespan_state

# Version documents are public, as in Nova, Glance and Neutron: clients discover before auth.
# So are the keys relying parties verify signed instance identities with (identity/api.py).
# In noauth2, so is the version document of the Keystone stand-in (keystone_stand_in.py).
PUBLIC_PATHS = (
    frozenset({"/", "/v2.1", "/v2.1/", "/healthz", "/image", "/image/", "/network", "/network/"})
    | identity_api.PUBLIC_PATHS
)
NOAUTH_PUBLIC_PATHS = PUBLIC_PATHS | keystone_stand_in.VERSION_PATHS


@dataclass(frozen=True)
class ComputeState:
    """What the compute API's lifespan opens for every request, one typed fragment per reader
    (``web/state.py``); each route module reads its own with its own accessor."""

    web: WebState
    servers: ServersState
    # quotas.api's usage counter (quotas is below servers and cells).
    quotas: QuotasState
    # hosts.api's view of the cells and of what each host's instances use.
    hosts: HostsState
    # images.glance_api's question before it removes a deleted image's file.
    images: ImagesState
    # identity.api's signing keys (read from the API database, cached briefly).
    identity: IdentityState
    # configdrive.api's drive builder (the Ironic forms, 2.108).
    config_drive: ConfigDriveState

    def lifespan_state(self) -> dict[str, Any]:
        return lifespan_state(*(getattr(self, field.name) for field in fields(self)))


@asynccontextmanager
async def compute_lifespan(
    _app: Starlette,
    *,
    settings: Settings,
    api_db: Database | None,
    driver: Driver | None,
    compute: bool,
) -> AsyncIterator[dict[str, Any]]:
    """What the compute API's requests share, open while it serves (``create_api_app`` says
    what the arguments mean): the API database unless given, its cells, the compute agent
    with ``compute``, and the ``ComputeState`` built on them."""
    db = api_db or Database.connect("api", settings.api_database_url)
    cells = CellDatabases(db)
    agent = make_agent(settings, cells, driver=driver) if compute else None
    servers = Servers(
        api_db=db,
        cells=cells,
        local_console=agent.driver.console_output if agent else None,
        local_host=agent.host if agent else None,
    )
    drives = DriveBuilder(settings, cells)
    if agent is not None:
        await run_in_threadpool(agent.start)
    try:
        state = ComputeState(
            web=WebState(settings=settings, api_db=db),
            servers=ServersState(servers=servers),
            quotas=QuotasState(usage=partial(server_quota.usages, cells)),
            hosts=HostsState(cells=cells, host_usage=server_quota.by_host),
            images=ImagesState(image_in_use=partial(image_in_use, cells)),
            identity=IdentityState(keyring=Keyring(db, settings.identity)),
            config_drive=ConfigDriveState(drives=drives),
        )
        # Starlette copies this into every request's scope (web.state.fragment_of).
        yield state.lifespan_state()
    finally:
        if agent is not None:
            await run_in_threadpool(agent.stop)
            agent.close(own_driver=driver is None)
        drives.close()
        cells.dispose()
        if api_db is None:
            db.dispose()


def create_api_app(
    settings: Settings,
    *,
    api_db: Database | None = None,
    driver: Driver | None = None,
    compute: bool = True,
) -> ASGIApp:
    """The compute API. ``api_db`` is opened from settings in the lifespan when not given.
    With ``compute`` (the embedded deployment), the lifespan also runs this node's compute
    agent with ``driver`` (default: the one ``[DEFAULT] compute_driver`` names);
    ``cloudseed serve --no-compute`` serves the API alone and agents run elsewhere
    (``cloudseed compute``)."""
    lifespan = partial(
        compute_lifespan, settings=settings, api_db=api_db, driver=driver, compute=compute
    )

    keystone = settings.api.auth_strategy == "keystone"
    public = PUBLIC_PATHS if keystone else NOAUTH_PUBLIC_PATHS

    def is_public(path: str) -> bool:
        return path in public

    if keystone:
        auth = Middleware(
            KeystoneMiddleware,
            is_public=is_public,
            options=settings.passthrough.get("keystone_authtoken", {}),
        )
    else:
        auth = Middleware(NoAuthMiddleware, is_public=is_public)

    prefix = settings.api.compute_link_prefix

    async def root(request: Request) -> Response:
        return JSONResponse(versions.versions_document(base_url(request, prefix)))

    async def v21(request: Request) -> Response:
        return JSONResponse(versions.version_document(base_url(request, prefix)))

    routes = [
        Route("/", root, methods=["GET"]),
        Route("/v2.1", v21, methods=["GET"]),
        Route("/v2.1/", v21, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        *domain_routes(),
        *([] if keystone else keystone_stand_in.routes),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[auth],
        exception_handlers={
            HTTPException: _http_exception,
            CloudseedError: _fault,
            Exception: _fault,
        },
    )
    return ComputeEdge(app)


def domain_routes() -> list[Route]:
    """Every domain's routes. The compute ones, declared below ``/v2.1``, are served under
    ``/v2.1`` and, as Nova does for old service catalogs, under ``/v2.1/{project_id}``. The
    plain ``/v2.1/...`` ones come first so that a path such as ``/v2.1/flavors/servers`` is a
    flavor, never the servers of a project called "flavors"."""
    compute = [
        *keypairs_api.v21_routes,
        *servers_api.v21_routes,
        *hostkeys_api.v21_routes,
        *nocloud_api.v21_routes,
        *configdrive_api.v21_routes,
        *flavors_api.v21_routes,
        *images_api.v21_routes,
        *quotas_api.v21_routes,
        *hosts_api.v21_routes,
    ]
    return [
        *under("/v2.1", compute),
        *images_api.routes,
        *networks_api.routes,
        *identity_api.routes,
        *under("/v2.1/{project_id}", compute),
    ]


def under(prefix: str, routes: list[Route]) -> list[Route]:
    """``routes`` with ``prefix`` before each path: same endpoints, methods and names."""
    return [
        Route(prefix + route.path, route.endpoint, methods=route.methods, name=route.name)
        for route in routes
    ]


async def healthz(request: Request) -> Response:
    """200 when the API database answers; 503 otherwise (for load balancers)."""
    db = api_db_of(request)

    def ping() -> None:
        with db.read() as session:
            session.execute(text("SELECT 1"))

    try:
        await run_in_threadpool(ping)
    except Exception:
        return JSONResponse({"status": "unavailable", "database": "unreachable"}, 503)
    return JSONResponse({"status": "ok"})


async def _fault(request: Request, exc: Exception) -> Response:
    status, headers, body = fault_parts(exc, glance=is_glance_path(request.url.path))
    return Response(body, status_code=status, headers=dict(headers))


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    mapped: CloudseedError
    if exc.status_code == 405:
        mapped = MethodNotAllowed(allowed_methods(request.app.router.routes, request.scope))
    else:
        mapped = ResourceNotFound()
    return await _fault(request, mapped)


def allowed_methods(routes: list[BaseRoute], scope: Scope) -> str:
    """The ``Allow`` header of a 405: every method some route serves at this path (Starlette's
    own names only the first route's, and a URL often has one route per method)."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods and route.matches(scope)[0] != Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))
