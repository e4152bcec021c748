"""``/v2.1/flavors``: the read side of the flavor registry, in Nova's shape."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cloudseed.flavors import service
from cloudseed.flavors.models import Flavor
from cloudseed.web.links import links
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import api_base, api_db_of, context_of, version_of


def _view(flavor: Flavor, version: APIVersion, base: str, *, detail: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": flavor.flavorid,
        "name": flavor.name,
        "links": links(base, "flavors", flavor.flavorid),
    }
    if version >= APIVersion(2, 55):
        body["description"] = flavor.description
    if detail:
        body.update(
            {
                "ram": flavor.memory_mb,
                "disk": flavor.root_gb,
                "vcpus": flavor.vcpus,
                "swap": flavor.swap or "",
                "rxtx_factor": 1.0,
                "OS-FLV-EXT-DATA:ephemeral": flavor.ephemeral_gb,
                "OS-FLV-DISABLED:disabled": flavor.disabled,
                "os-flavor-access:is_public": flavor.is_public,
            }
        )
        if version >= APIVersion(2, 61):
            body["extra_specs"] = {}
    return body


async def _list(request: Request, *, detail: bool) -> Response:
    context_of(request)
    db, version, base = api_db_of(request), version_of(request), api_base(request)

    def run() -> list[dict[str, Any]]:
        with db.read() as session:
            return [_view(f, version, base, detail=detail) for f in service.list_flavors(session)]

    return JSONResponse({"flavors": await run_in_threadpool(run)})


async def index(request: Request) -> Response:
    return await _list(request, detail=False)


async def detail(request: Request) -> Response:
    return await _list(request, detail=True)


async def show(request: Request) -> Response:
    context_of(request)
    db, version, base = api_db_of(request), version_of(request), api_base(request)

    def run() -> dict[str, Any]:
        with db.read() as session:
            return _view(
                service.get_flavor(session, request.path_params["flavor_id"]),
                version,
                base,
                detail=True,
            )

    return JSONResponse({"flavor": await run_in_threadpool(run)})


# Nova also answers under /v2.1/{project_id}/..., which old service catalogs still use.
routes = [
    route
    for prefix in ("/v2.1", "/v2.1/{project_id}")
    for route in (
        Route(f"{prefix}/flavors", index, methods=["GET"]),
        Route(f"{prefix}/flavors/detail", detail, methods=["GET"]),
        Route(f"{prefix}/flavors/{{flavor_id}}", show, methods=["GET"]),
    )
]
