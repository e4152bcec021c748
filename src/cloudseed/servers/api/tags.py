"""``/v2.1/servers/{id}/tags`` (Nova's 2.26): list, replace and delete a server's tags, and
check, add and delete one. Below 2.26 the resource does not exist (404).

The server must be the caller's (or the caller an administrator), as for its metadata items.
Changes need the server active, paused, suspended or stopped (``lifecycle/tags.py``).
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.servers import tags
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.errors import TagNotFound
from cloudseed.servers.lifecycle import tags as tag_edits
from cloudseed.web.errors import ResourceNotFound
from cloudseed.web.links import links
from cloudseed.web.requests import api_base, body_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.validation import read_json, validate


def _since_2_26(request: Request) -> None:
    if version_of(request) < tags.SINCE:
        raise ResourceNotFound()


async def _server(request: Request) -> str:
    """The uuid of the caller's server named in the URL (404 for anyone else's)."""
    _since_2_26(request)
    return (await load_owned(request)).instance.uuid


async def index(request: Request) -> Response:
    uuid = await _server(request)
    listed = await in_cell(request, uuid, lambda session: tag_edits.listed(session, uuid))
    return JSONResponse({"tags": listed})


async def replace(request: Request) -> Response:
    _since_2_26(request)
    body = await body_of(request, tags.REPLACE_BODY)  # first, as Nova's schema decorator
    uuid = await _server(request)
    result = await in_cell(
        request, uuid, lambda session: tag_edits.replace(session, uuid, body["tags"]), write=True
    )
    return JSONResponse({"tags": result})


async def delete_all(request: Request) -> Response:
    uuid = await _server(request)
    await in_cell(request, uuid, lambda session: tag_edits.remove_all(session, uuid), write=True)
    return Response(status_code=204)


async def show(request: Request) -> Response:
    uuid, tag = await _server(request), request.path_params["tag"]
    if tag not in await in_cell(request, uuid, lambda session: tag_edits.listed(session, uuid)):
        raise TagNotFound(uuid=uuid, tag=tag)
    return Response(status_code=204)


async def add(request: Request) -> Response:
    _since_2_26(request)
    body = await read_json(
        request, max_size=settings_of(request).oslo_middleware.max_request_body_size
    )
    # Nova's body is null: none at all (read as {}) or a JSON null.
    validate(tags.ADD_BODY, None if body == {} else body)
    uuid, tag = await _server(request), request.path_params["tag"]
    created = await in_cell(
        request, uuid, lambda session: tag_edits.add(session, uuid, tag), write=True
    )
    if not created:
        return Response(status_code=204)
    server = links(api_base(request), "servers", uuid)[0]["href"]
    location = f"{server}/tags/{quote(tag, safe='')}"
    return Response(status_code=201, headers={"Location": location})


async def delete(request: Request) -> Response:
    uuid, tag = await _server(request), request.path_params["tag"]
    removed = await in_cell(
        request, uuid, lambda session: tag_edits.remove(session, uuid, tag), write=True
    )
    if not removed:
        raise TagNotFound(uuid=uuid, tag=tag, noun="Instance")
    return Response(status_code=204)
