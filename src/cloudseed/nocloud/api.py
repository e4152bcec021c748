"""``/v2.1/servers/{id}/nocloud-seed`` (2.107): a server's NoCloud seed URL, for its project and
administrators (another project's server is Nova's 404, as every server sub-resource); below
2.107 the resource does not exist (404).

``GET`` shows the seed, making one when the server has none or its seed expired (nothing is
written for servers that never use NoCloud); ``POST .../action`` takes ``{"rotate": null}`` (a
new URL, also after a revoke) or ``{"revoke": null}`` (no URL until a rotate), refused on a
locked server as Nova's actions are (administrators pass).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.nocloud import schemas, service, views
from cloudseed.nocloud.errors import SeedRaced
from cloudseed.nocloud.seeds import Seed
from cloudseed.servers.api.requests import in_cell, load_owned, load_unlocked, servers_of
from cloudseed.web.errors import ResourceNotFound
from cloudseed.web.requests import body_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse

T = TypeVar("T")


def _resource(request: Request) -> None:
    if version_of(request) < schemas.NOCLOUD_SEEDS:
        raise ResourceNotFound()


def _body(request: Request, uuid: str, seed: Seed) -> Response:
    metadata = settings_of(request).metadata
    return JSONResponse(
        views.nocloud_seed(
            key=metadata.nocloud_seed_secret.encode(),
            base=metadata.nocloud_seed_url,
            server=uuid,
            seed=seed,
        )
    )


async def _write(request: Request, uuid: str, work: Callable[[Session], T]) -> T:
    """``work`` in one write transaction of the server's cell, run again when a concurrent
    request stored the server's seed first."""
    cells = servers_of(request).cells
    return await run_in_threadpool(
        lambda: cells.for_instance(uuid).run(work, write=True, lost_to=(SeedRaced,))
    )


async def show(request: Request) -> Response:
    _resource(request)
    uuid = (await load_owned(request)).instance.uuid
    now = time.time()
    seed = await in_cell(request, uuid, lambda session: service.shown(session, uuid, now=now))
    if seed is None:
        lifetime = settings_of(request).metadata.nocloud_seed_lifetime
        seed = await _write(
            request,
            uuid,
            lambda session: service.current(session, uuid, now=now, lifetime=lifetime),
        )
    return _body(request, uuid, seed)


async def action(request: Request) -> Response:
    _resource(request)
    body = await body_of(request, schemas.ACTION)  # first, as Nova's schema decorator
    uuid = (await load_unlocked(request)).instance.uuid
    if "revoke" in body:
        await _write(request, uuid, lambda session: service.revoke(session, uuid))
        return Response(status_code=204)
    now, lifetime = time.time(), settings_of(request).metadata.nocloud_seed_lifetime
    seed = await _write(
        request, uuid, lambda session: service.rotate(session, uuid, now=now, lifetime=lifetime)
    )
    return _body(request, uuid, seed)


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [
    Route("/servers/{server_id}/nocloud-seed", show, methods=["GET"]),
    Route("/servers/{server_id}/nocloud-seed/action", action, methods=["POST"]),
]
