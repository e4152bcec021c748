"""``/v2.1/servers/{id}/os-instance-actions``: what was done to a server, as Nova records it
(the records themselves are kept by ``servers.action_log``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.servers import action_log
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import context_of, version_of


async def index(request: Request) -> Response:
    uuid = (await load_owned(request)).instance.uuid
    actions = await in_cell(request, uuid, lambda session: action_log.list_actions(session, uuid))
    return JSONResponse({"instanceActions": actions})


async def show(request: Request) -> Response:
    uuid = (await load_owned(request)).instance.uuid
    context = context_of(request)
    with_details = context.is_admin or version_of(request) >= APIVersion(2, 84)
    request_id = request.path_params["request_id"]
    action = await in_cell(
        request,
        uuid,
        lambda session: action_log.show_action(
            session, uuid, request_id, with_details=with_details
        ),
    )
    if not context.is_admin:
        for event in action["events"]:
            event.pop("traceback", None)
    return JSONResponse({"instanceAction": action})
