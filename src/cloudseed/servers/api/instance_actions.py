"""``/v2.1/servers/{id}/os-instance-actions``: what was done to a server, as Nova records it
(the records themselves are kept by ``servers.action_log``)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.servers import action_log
from cloudseed.servers.api.requests import load_owned, servers_of
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import context_of, version_of


async def index(request: Request) -> Response:
    record = await load_owned(request)
    db = servers_of(request).cells.for_instance(record.instance.uuid)

    def run() -> list[dict[str, object]]:
        with db.read() as session:
            return action_log.list_actions(session, record.instance.uuid)

    return JSONResponse({"instanceActions": await run_in_threadpool(run)})


async def show(request: Request) -> Response:
    record = await load_owned(request)
    context = context_of(request)
    db = servers_of(request).cells.for_instance(record.instance.uuid)
    with_details = context.is_admin or version_of(request) >= APIVersion(2, 84)

    def run() -> dict[str, object]:
        with db.read() as session:
            return action_log.show_action(
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
