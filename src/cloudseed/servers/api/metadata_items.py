"""``/v2.1/servers/{id}/metadata``: a server's user-visible key/value metadata."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.errors import InvalidInput
from cloudseed.servers import schemas
from cloudseed.servers.api.requests import load_owned, servers_of
from cloudseed.servers.errors import MetadataItemNotFound
from cloudseed.web.requests import body_of


async def index(request: Request) -> Response:
    return JSONResponse({"metadata": (await load_owned(request)).metadata})


async def replace_or_update(request: Request) -> Response:
    body = await body_of(request, schemas.METADATA_BODY)
    record = await load_owned(request)
    replace = request.method == "PUT"
    result = await run_in_threadpool(
        lambda: servers_of(request).set_metadata(
            record.instance.uuid, body["metadata"], replace=replace
        )
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
    record = await load_owned(request)
    await run_in_threadpool(
        lambda: servers_of(request).set_metadata(record.instance.uuid, body["meta"], replace=False)
    )
    return JSONResponse({"meta": body["meta"]})


async def delete_item(request: Request) -> Response:
    record, key = await load_owned(request), request.path_params["key"]
    deleted = await run_in_threadpool(
        lambda: servers_of(request).delete_metadata_item(record.instance.uuid, key)
    )
    if not deleted:
        raise MetadataItemNotFound()
    return Response(status_code=204)
