"""``/v2.1/flavors``: the read side of the flavor registry, in Nova's shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.errors import InvalidInput
from cloudseed.flavors import service
from cloudseed.flavors.models import Flavor
from cloudseed.web.links import links, next_link
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import api_base, api_db_of, context_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import bounded_int


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


def _min_filter(query: Mapping[str, str], name: str) -> int | None:
    """Nova's ``minRam``/``minDisk``: a non-negative integer, else 400."""
    if name not in query:
        return None
    try:
        value = int(query[name])
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidInput(f"Invalid {name} filter [{query[name]}]")
    return value


async def _list(request: Request, *, detail: bool) -> Response:
    context_of(request)  # authenticated
    db, version, base = api_db_of(request), version_of(request), api_base(request)
    query = dict(request.query_params)
    min_ram, min_disk = _min_filter(query, "minRam"), _min_filter(query, "minDisk")
    max_limit = settings_of(request).api.max_limit
    limit = max_limit
    if "limit" in query:
        try:
            limit = min(max_limit, bounded_int(query["limit"], "limit", minimum=0))
        except InvalidInput as exc:
            raise InvalidInput("limit param must be an integer") from exc
    marker = query.get("marker")

    found = [
        f
        for f in await in_transaction(db, service.list_flavors)
        if (min_ram is None or f.memory_mb >= min_ram)
        and (min_disk is None or f.root_gb >= min_disk)
    ]
    if marker is not None:
        ids = [f.flavorid for f in found]
        if marker not in ids:
            raise InvalidInput(f"marker [{marker}] not found")
        found = found[ids.index(marker) + 1 :]
    found = found[:limit]
    body: dict[str, Any] = {"flavors": [_view(f, version, base, detail=detail) for f in found]}
    if "limit" in query and found and len(found) == limit:
        body["flavors_links"] = [
            {
                "rel": "next",
                "href": next_link(
                    request,
                    settings_of(request).api.compute_link_prefix,
                    request.url.path,
                    {k: request.query_params.getlist(k) for k in request.query_params},
                    found[-1].flavorid,
                ),
            }
        ]
    return JSONResponse(body)


async def index(request: Request) -> Response:
    return await _list(request, detail=False)


async def detail(request: Request) -> Response:
    return await _list(request, detail=True)


async def show(request: Request) -> Response:
    context_of(request)
    db, version, base = api_db_of(request), version_of(request), api_base(request)

    def read(session: Session) -> dict[str, Any]:
        return _view(
            service.get_flavor(session, request.path_params["flavor_id"]),
            version,
            base,
            detail=True,
        )

    return JSONResponse({"flavor": await in_transaction(db, read)})


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [
    Route("/flavors", index, methods=["GET"]),
    Route("/flavors/detail", detail, methods=["GET"]),
    Route("/flavors/{flavor_id}", show, methods=["GET"]),
]
