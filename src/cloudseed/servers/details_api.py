"""Server sub-resources: metadata, instance actions, and cloudseed's bootstrap history."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.api.errors import PolicyNotAuthorized
from cloudseed.api.microversions import APIVersion
from cloudseed.api.requests import context_of, version_of
from cloudseed.errors import InvalidInput, NotFound
from cloudseed.servers import actions, history, schemas
from cloudseed.servers.api import body_of, load_owned, servers_of


class MetadataItemNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("Metadata item was not found")


async def metadata_index(request: Request) -> Response:
    return JSONResponse({"metadata": (await load_owned(request)).metadata})


async def metadata_replace_or_update(request: Request) -> Response:
    body = await body_of(request, schemas.METADATA_BODY)
    record = await load_owned(request)
    replace = request.method == "PUT"
    result = await run_in_threadpool(
        lambda: servers_of(request).set_metadata(
            record.instance.uuid, body["metadata"], replace=replace
        )
    )
    return JSONResponse({"metadata": result})


async def metadata_show(request: Request) -> Response:
    record, key = await load_owned(request), request.path_params["key"]
    if key not in record.metadata:
        raise MetadataItemNotFound()
    return JSONResponse({"meta": {key: record.metadata[key]}})


async def metadata_put_item(request: Request) -> Response:
    body = await body_of(request, schemas.METADATA_ITEM_BODY)
    key = request.path_params["key"]
    if key not in body["meta"]:
        raise InvalidInput("Request body and URI mismatch")
    record = await load_owned(request)
    await run_in_threadpool(
        lambda: servers_of(request).set_metadata(record.instance.uuid, body["meta"], replace=False)
    )
    return JSONResponse({"meta": body["meta"]})


async def metadata_delete_item(request: Request) -> Response:
    record, key = await load_owned(request), request.path_params["key"]
    deleted = await run_in_threadpool(
        lambda: servers_of(request).delete_metadata_item(record.instance.uuid, key)
    )
    if not deleted:
        raise MetadataItemNotFound()
    return Response(status_code=204)


async def actions_index(request: Request) -> Response:
    record = await load_owned(request)
    db = servers_of(request).cells.for_instance(record.instance.uuid)

    def run() -> list[dict[str, object]]:
        with db.read() as session:
            return actions.list_actions(session, record.instance.uuid)

    return JSONResponse({"instanceActions": await run_in_threadpool(run)})


async def actions_show(request: Request) -> Response:
    record = await load_owned(request)
    context = context_of(request)
    db = servers_of(request).cells.for_instance(record.instance.uuid)
    with_details = context.is_admin or version_of(request) >= APIVersion(2, 84)

    def run() -> dict[str, object]:
        with db.read() as session:
            return actions.show_action(
                session,
                record.instance.uuid,
                request.path_params["request_id"],
                with_details=with_details,
            )

    action = await run_in_threadpool(run)
    if not context.is_admin:
        for event in action["events"]:  # type: ignore[attr-defined]
            event.pop("traceback", None)
    return JSONResponse({"instanceAction": action})


async def bootstrap_history(request: Request) -> Response:
    """cloudseed's extension: every key pair and user data change of a server (admins)."""
    context = context_of(request)
    if not context.is_admin:
        raise PolicyNotAuthorized("cloudseed:servers:bootstrap-history")
    record = await load_owned(request)
    db = servers_of(request).cells.for_instance(record.instance.uuid)

    def run() -> list[dict[str, object]]:
        with db.read() as session:
            return history.history(session, record.instance.uuid)

    return JSONResponse({"bootstrap_history": await run_in_threadpool(run)})


async def password_show(request: Request) -> Response:
    """``os-server-password``: what the guest posted to the metadata service ('' if none)."""
    record = await load_owned(request)
    value = await run_in_threadpool(lambda: servers_of(request).password(record.instance.uuid))
    return JSONResponse({"password": value})


async def password_clear(request: Request) -> Response:
    record = await load_owned(request)
    await run_in_threadpool(lambda: servers_of(request).clear_password(record.instance.uuid))
    return Response(status_code=204)
