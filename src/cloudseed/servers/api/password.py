"""``/v2.1/servers/{id}/os-server-password``: read or clear what the guest posted to the
metadata service."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.lifecycle import password as stored_password
from cloudseed.web.responses import JSONResponse


async def show(request: Request) -> Response:
    """What the guest posted to the metadata service ('' if none)."""
    uuid = (await load_owned(request)).instance.uuid
    value = await in_cell(request, uuid, lambda session: stored_password.read(session, uuid))
    return JSONResponse({"password": value})


async def clear(request: Request) -> Response:
    uuid = (await load_owned(request)).instance.uuid
    await in_cell(request, uuid, lambda session: stored_password.clear(session, uuid), write=True)
    return Response(status_code=204)
