"""``/v2.1/servers/{id}/metadata``: a server's user-visible key/value metadata."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.errors import InvalidInput
from cloudseed.servers import edits, schemas
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.errors import MetadataItemNotFound
from cloudseed.web.requests import body_of


async def index(request: Request) -> Response:
    return JSONResponse({"metadata": (await load_owned(request)).metadata})


async def replace_or_update(request: Request) -> Response:
    body = await body_of(request, schemas.METADATA_BODY)
    uuid = (await load_owned(request)).instance.uuid
    replace = request.method == "PUT"
    result = await in_cell(
        request,
        uuid,
        lambda session: edits.set_metadata(session, uuid, body["metadata"], replace=replace),
        write=True,
    )
    return JSONResponse({"metadata": result})


async def show(request: Request) -> Response:
    record, key = await load_owned(request), request.path_params["key"]
    if key not in record.metadata:
        raise MetadataItemNotFound()
    return JSONResponse({"meta": {key: record.metadata[key]}})


async def put_item(request: Request) -> Response:
    body = await body_of(request, schemas.METADATA_ITEM_BODY)
    key = request.path_params["key"]
    if key not in body["meta"]:
        raise InvalidInput("Request body and URI mismatch")
    uuid = (await load_owned(request)).instance.uuid
    await in_cell(
        request,
        uuid,
        lambda session: edits.set_metadata(session, uuid, body["meta"], replace=False),
        write=True,
    )
    return JSONResponse({"meta": body["meta"]})


async def delete_item(request: Request) -> Response:
    uuid, key = (await load_owned(request)).instance.uuid, request.path_params["key"]
    deleted = await in_cell(
        request, uuid, lambda session: edits.delete_metadata_item(session, uuid, key), write=True
    )
    if not deleted:
        raise MetadataItemNotFound()
    return Response(status_code=204)
