"""``/v2.1/servers/{id}/metadata``: a server's user-visible key/value metadata."""

from __future__ import annotations

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from cloudseed.errors import InvalidInput
from cloudseed.quotas.service import metadata_items_limit
from cloudseed.servers import schemas
from cloudseed.servers.api.requests import in_cell, load_owned, load_unlocked
from cloudseed.servers.errors import MetadataItemNotFound
from cloudseed.servers.lifecycle import edits
from cloudseed.servers.records import ServerRecord
from cloudseed.web.requests import api_db_of, body_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction


async def index(request: Request) -> Response:
    return JSONResponse({"metadata": (await load_owned(request)).metadata})


async def _limit(request: Request, record: ServerRecord) -> int:
    """The ``metadata_items`` quota of the server's project and user (API database)."""
    db = api_db_of(request)

    def read(session: Session) -> int:
        return metadata_items_limit(
            session, project_id=record.instance.project_id, user_id=record.instance.user_id
        )

    return await in_transaction(db, read)


async def replace_or_update(request: Request) -> Response:
    body = await body_of(request, schemas.METADATA_BODY)
    record = await load_unlocked(request)
    uuid, limit = record.instance.uuid, await _limit(request, record)
    replace = request.method == "PUT"
    result = await in_cell(
        request,
        uuid,
        lambda session: edits.set_metadata(
            session, uuid, body["metadata"], replace=replace, limit=limit
        ),
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
    record = await load_unlocked(request)
    uuid, limit = record.instance.uuid, await _limit(request, record)
    await in_cell(
        request,
        uuid,
        lambda session: edits.set_metadata(session, uuid, body["meta"], replace=False, limit=limit),
        write=True,
    )
    return JSONResponse({"meta": body["meta"]})


async def delete_item(request: Request) -> Response:
    uuid, key = (await load_unlocked(request)).instance.uuid, request.path_params["key"]
    deleted = await in_cell(
        request, uuid, lambda session: edits.delete_metadata_item(session, uuid, key), write=True
    )
    if not deleted:
        raise MetadataItemNotFound()
    return Response(status_code=204)
