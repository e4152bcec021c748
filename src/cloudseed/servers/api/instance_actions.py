"""``/v2.1/servers/{id}/os-instance-actions``: what was done to a server, as Nova records it
(the records are kept by ``servers.action_log``, the bodies made by ``servers.action_views``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.servers import action_log, action_views
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.web.requests import context_of, version_of


async def index(request: Request) -> Response:
    uuid = (await load_owned(request)).instance.uuid
    version = version_of(request)
    found = await in_cell(request, uuid, lambda session: action_log.list_actions(session, uuid))
    return JSONResponse({"instanceActions": [action_views.action(a, version) for a in found]})


async def show(request: Request) -> Response:
    instance = (await load_owned(request)).instance
    uuid = instance.uuid
    request_id = request.path_params["request_id"]
    found = await in_cell(
        request, uuid, lambda session: action_log.show_action(session, uuid, request_id)
    )
    body = action_views.action_with_events(
        found,
        version_of(request),
        admin=context_of(request).is_admin,
        host=instance.host,
        instance_project_id=instance.project_id,
    )
    return JSONResponse({"instanceAction": body})
