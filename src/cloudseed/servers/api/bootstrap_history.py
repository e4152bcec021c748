"""``/v2.1/servers/{id}/bootstrap-history``: cloudseed's extension listing every key pair and
user data change of a server (administrators only)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from cloudseed.servers import history
from cloudseed.servers.api.requests import load_owned, servers_of
from cloudseed.web.errors import PolicyNotAuthorized
from cloudseed.web.requests import context_of


async def show(request: Request) -> Response:
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
