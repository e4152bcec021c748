"""``/v2.1/servers/{id}/os-instance-actions``: what was done to a server, as Nova records it
(the records are kept by ``servers.action_log``, the bodies made by ``servers.action_views``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.history import action_views
from cloudseed.servers.history import actions as action_log
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import context_of, version_of
from cloudseed.web.responses import JSONResponse

# From 2.21 the actions of a deleted server can still be read.
READ_DELETED_SINCE = APIVersion(2, 21)


async def index(request: Request) -> Response:
    version = version_of(request)
    read_deleted = version >= READ_DELETED_SINCE
    uuid = (await load_owned(request, read_deleted=read_deleted)).instance.uuid
    found = await in_cell(
        request,
        uuid,
        lambda session: action_log.list_actions(session, uuid),
        deleted_too=read_deleted,
    )
    return JSONResponse({"instanceActions": [action_views.action(a, version) for a in found]})


async def show(request: Request) -> Response:
    read_deleted = version_of(request) >= READ_DELETED_SINCE
    instance = (await load_owned(request, read_deleted=read_deleted)).instance
    uuid = instance.uuid
    request_id = request.path_params["request_id"]
    found = await in_cell(
        request,
        uuid,
        lambda session: action_log.show_action(session, uuid, request_id),
        deleted_too=read_deleted,
    )
    body = action_views.action_with_events(
        found,
        version_of(request),
        admin=context_of(request).is_admin,
        host=instance.host,
        instance_project_id=instance.project_id,
    )
    return JSONResponse({"instanceAction": body})
