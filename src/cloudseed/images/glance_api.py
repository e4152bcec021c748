"""A read-only slice of the Image API v2 (Glance's format) at ``/image``.

openstacksdk and the openstack CLI look images up through the image service (to name the
image in ``server show``, to resolve ``--image NAME``). cloudseed has no Glance, so it answers
those look-ups from its own registry. Point clients at it with ``image_endpoint_override:
http://HOST:8774/image`` (or an ``image`` endpoint in the Keystone catalog).
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cloudseed.images import service
from cloudseed.images.errors import ImageNotFound
from cloudseed.images.models import Image
from cloudseed.web.links import base_url
from cloudseed.web.requests import api_db_of, context_of, settings_of


def _time(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def image_body(image: Image) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": image.uuid,
        "name": image.name,
        "status": image.status,
        "disk_format": image.disk_format,
        "container_format": image.container_format,
        "size": image.size,
        "virtual_size": image.virtual_size,
        "min_disk": image.min_disk,
        "min_ram": image.min_ram,
        "os_hash_algo": "sha256",
        "os_hash_value": image.checksum_sha256,
        "checksum": None,
        "visibility": "public",
        "protected": False,
        "tags": [],
        "created_at": _time(image.created_at),
        "updated_at": _time(image.updated_at or image.created_at),
        "self": f"/v2/images/{image.uuid}",
        "file": f"/v2/images/{image.uuid}/file",
        "schema": "/v2/schemas/image",
    }
    for key, value in service.properties_of(image).items():
        body.setdefault(key, value)  # Glance flattens properties into the image
    return body


async def versions(request: Request) -> Response:
    prefix = settings_of(request).api.compute_link_prefix
    return JSONResponse(
        {
            "versions": [
                {
                    "id": "v2.16",
                    "status": "CURRENT",
                    "links": [{"rel": "self", "href": f"{base_url(request, prefix)}/image/v2/"}],
                }
            ]
        }
    )


async def show(request: Request) -> Response:
    context_of(request)
    db, ref = api_db_of(request), request.path_params["image_id"]

    def run() -> dict[str, Any]:
        with db.read() as session:
            image = service.get_image(session, ref)
            if image.uuid != ref:  # Glance looks images up by id only
                raise ImageNotFound(ref)
            return image_body(image)

    return JSONResponse(await run_in_threadpool(run))


async def index(request: Request) -> Response:
    context_of(request)
    db, name = api_db_of(request), request.query_params.get("name")

    def run() -> list[dict[str, Any]]:
        with db.read() as session:
            return [
                image_body(i)
                for i in service.list_images(session)
                if name is None or i.name == name
            ]

    return JSONResponse(
        {
            "images": await run_in_threadpool(run),
            "first": "/v2/images",
            "schema": "/v2/schemas/images",
        }
    )


routes = [
    Route("/image", versions, methods=["GET"]),
    Route("/image/", versions, methods=["GET"]),
    Route("/image/v2/images", index, methods=["GET"]),
    Route("/image/v2/images/{image_id}", show, methods=["GET"]),
]
