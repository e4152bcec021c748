"""``GET /v2.1/servers/{id}/host-keys``: cloudseed's extension, at every microversion.

The server's SSH host keys as its guest reported them (phone_home, else the console), for its
project and administrators: another project's server does not exist (Nova's 404), as for every
server sub-resource (``servers/api/requests.load_owned``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.hostkeys import service, views
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.web.responses import JSONResponse


async def show(request: Request) -> Response:
    uuid = (await load_owned(request)).instance.uuid
    shown = await in_cell(request, uuid, lambda session: service.host_keys(session, uuid))
    return JSONResponse(views.host_keys(shown))


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [Route("/servers/{server_id}/host-keys", show, methods=["GET"])]
