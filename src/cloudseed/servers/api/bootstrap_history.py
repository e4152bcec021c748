"""``/v2.1/servers/{id}/bootstrap-history``: cloudseed's extension listing every key pair and
user data change of a server (administrators only)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.history import bootstrap as history
from cloudseed.web.errors import PolicyNotAuthorized
from cloudseed.web.requests import context_of
from cloudseed.web.responses import JSONResponse


async def show(request: Request) -> Response:
    if not context_of(request).is_admin:
        raise PolicyNotAuthorized("cloudseed:servers:bootstrap-history")
    uuid = (await load_owned(request)).instance.uuid
    changes = await in_cell(request, uuid, lambda session: history.history(session, uuid))
    return JSONResponse({"bootstrap_history": changes})
