"""``/v2.1/servers/{id}/os-server-password``: read or clear what the guest posted to the
metadata service."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.servers.api.requests import load_owned, servers_of


async def show(request: Request) -> Response:
    """``os-server-password``: what the guest posted to the metadata service ('' if none)."""
    record = await load_owned(request)
    value = await run_in_threadpool(lambda: servers_of(request).password(record.instance.uuid))
    return JSONResponse({"password": value})


async def clear(request: Request) -> Response:
    record = await load_owned(request)
    await run_in_threadpool(lambda: servers_of(request).clear_password(record.instance.uuid))
    return Response(status_code=204)
