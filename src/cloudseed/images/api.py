"""``/v2.1/images``: Nova's image proxy API over the image registry (read only); ``routes``
also carries the Glance slice (``glance_api``).

Nova answers 404 here from microversion 2.36 on and sends clients to Glance; cloudseed has no
Glance, so it keeps answering at every microversion (see docs/api-differences.md). Each caller
sees what Glance would show them (``access.py``): public images and their project's own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.images import glance_api, service
from cloudseed.images.glance_api import viewer_of
from cloudseed.images.models import Image
from cloudseed.web.links import links
from cloudseed.web.requests import api_base, api_db_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction

# Nova's image view: Glance's status, and a progress made of it.
STATUS = {
    "active": "ACTIVE",
    "queued": "SAVING",
    "saving": "SAVING",
    "deleted": "DELETED",
    "pending_delete": "DELETED",
    "killed": "ERROR",
}
PROGRESS = {"queued": 25, "saving": 50, "active": 100}


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
                "status": STATUS.get(image.status, "UNKNOWN"),
                "progress": PROGRESS.get(image.status, 0),
                "OS-EXT-IMG-SIZE:size": image.size,
            }
        )
    return body


async def _list(request: Request, *, detail: bool) -> Response:
    viewer, db, base = viewer_of(request), api_db_of(request), api_base(request)

    def read(session: Session) -> list[dict[str, Any]]:
        return [
            _view(i, base, detail=detail)
            for i in service.list_images(session, viewer=viewer)
            if not i.os_hidden  # Glance's default list leaves hidden images out
        ]

    return JSONResponse({"images": await in_transaction(db, read)})


async def index(request: Request) -> Response:
    return await _list(request, detail=False)


async def detail(request: Request) -> Response:
    return await _list(request, detail=True)


async def show(request: Request) -> Response:
    viewer, db, base = viewer_of(request), api_db_of(request), api_base(request)
    ref = request.path_params["image_id"]

    return JSONResponse(
        {
            "image": await in_transaction(
                db,
                lambda session: _view(
                    service.get_image(session, ref, viewer=viewer), base, detail=True
                ),
            )
        }
    )


# Nova's image proxy, below /v2.1: api/app.py serves it there and under /v2.1/{project_id}.
v21_routes = [
    Route("/images", index, methods=["GET"]),
    Route("/images/detail", detail, methods=["GET"]),
    Route("/images/{image_id}", show, methods=["GET"]),
]
# The Glance slice at /image.
routes = glance_api.routes
