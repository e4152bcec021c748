"""The compute API application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cloudseed.api import versions
from cloudseed.api.auth import KeystoneMiddleware, NoAuthMiddleware
from cloudseed.api.edge import ComputeEdge
from cloudseed.api.errors import MethodNotAllowed, ResourceNotFound
from cloudseed.api.faults import fault_parts
from cloudseed.api.links import base_url
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.driver import Driver
from cloudseed.compute.drivers import make_driver
from cloudseed.configdrive.service import DriveBuilder
from cloudseed.db.engines import Database
from cloudseed.errors import CloudseedError
from cloudseed.metadata.loading import vendordata_request_for
from cloudseed.servers.operations import Operations
from cloudseed.servers.service import Servers
from cloudseed.settings import Settings
from cloudseed.types import ASGIApp
from cloudseed.vendordata.build_check import build_check

# Version documents are public, as in Nova, Glance and Neutron: clients discover before auth.
PUBLIC_PATHS = frozenset(
    {"/", "/v2.1", "/v2.1/", "/healthz", "/image", "/image/", "/network", "/network/"}
)


@dataclass(frozen=True)
class ApiState:
    """What every request handler may use; built once in the lifespan."""

    settings: Settings
    api_db: Database
    servers: Servers | None = None


def api_state(request: Request) -> ApiState:
    state: ApiState = request.state.cloudseed
    return state


def create_api_app(
    settings: Settings, *, api_db: Database | None = None, driver: Driver | None = None
) -> ASGIApp:
    """The compute API. ``api_db`` is opened from settings in the lifespan when not given;
    ``driver`` defaults to the one ``[DEFAULT] compute_driver`` names."""
    from cloudseed.images.glance_api import routes as image_service_routes
    from cloudseed.keypairs.api import routes as keypair_routes
    from cloudseed.networks.neutron_api import routes as network_service_routes
    from cloudseed.servers.routes import routes as server_routes

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, Any]]:
        db = api_db or Database.connect("api", settings.api_database_url)
        cells = CellDatabases(db)
        check = build_check(settings, partial(vendordata_request_for, cells))
        drives = DriveBuilder(settings, cells)
        # A driver handed in belongs to the caller; one made here is closed here.
        compute = driver if driver is not None else make_driver(settings)
        operations = Operations(cells=cells, driver=compute, build_check=check, drives=drives)
        servers = Servers(api_db=db, cells=cells, operations=operations)
        try:
            yield {"cloudseed": ApiState(settings=settings, api_db=db, servers=servers)}
        finally:
            operations.shutdown()
            drives.close()
            if driver is None:
                compute.close()  # no guest process outlives the service
            if check is not None:
                check.close()
            cells.dispose()
            if api_db is None:
                db.dispose()

    def is_public(path: str) -> bool:
        return path in PUBLIC_PATHS

    if settings.api.auth_strategy == "keystone":
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
        *keypair_routes,
        *server_routes,
        *image_service_routes,
        *network_service_routes,
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


async def healthz(request: Request) -> Response:
    """200 when the API database answers; 503 otherwise (for load balancers)."""
    from sqlalchemy import text
    from starlette.concurrency import run_in_threadpool

    db = api_state(request).api_db

    def ping() -> None:
        with db.read() as session:
            session.execute(text("SELECT 1"))

    try:
        await run_in_threadpool(ping)
    except Exception:
        return JSONResponse({"status": "unavailable", "database": "unreachable"}, 503)
    return JSONResponse({"status": "ok"})


async def _fault(_request: Request, exc: Exception) -> Response:
    status, headers, body = fault_parts(exc)
    return Response(body, status_code=status, headers=dict(headers))


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    mapped = MethodNotAllowed() if exc.status_code == 405 else ResourceNotFound()
    return await _fault(request, mapped)
