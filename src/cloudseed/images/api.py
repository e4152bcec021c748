"""``/v2.1/images``: Nova's image proxy API over the image registry (read only).

Nova answers 404 here from microversion 2.36 on and sends clients to Glance; cloudseed has no
Glance, so it keeps answering at every microversion (see docs/api-differences.md).
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.api.app import api_state
from cloudseed.api.requests import context_of
from cloudseed.images import service
from cloudseed.images.models import Image
from cloudseed.servers.api import api_base
from cloudseed.servers.views import links


def _time(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _view(image: Image, base: str, *, detail: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": image.uuid,
        "name": image.name,
        "links": links(base, "images", image.uuid),
    }
    if detail:
        body.update(
            {
                "minRam": image.min_ram,
                "minDisk": image.min_disk,
                "metadata": service.properties_of(image),
                "created": _time(image.created_at),
                "updated": _time(image.updated_at or image.created_at),
                "status": image.status.upper(),
                "progress": 100,
                "OS-EXT-IMG-SIZE:size": image.size,
            }
        )
    return body


async def _list(request: Request, *, detail: bool) -> Response:
    context_of(request)
    db, base = api_state(request).api_db, api_base(request)

    def run() -> list[dict[str, Any]]:
        with db.read() as session:
            return [_view(i, base, detail=detail) for i in service.list_images(session)]

    return JSONResponse({"images": await run_in_threadpool(run)})


async def index(request: Request) -> Response:
    return await _list(request, detail=False)


async def detail(request: Request) -> Response:
    return await _list(request, detail=True)


async def show(request: Request) -> Response:
    context_of(request)
    db, base = api_state(request).api_db, api_base(request)

    def run() -> dict[str, Any]:
        with db.read() as session:
            return _view(
                service.get_image(session, request.path_params["image_id"]), base, detail=True
            )

    return JSONResponse({"image": await run_in_threadpool(run)})
