"""What every servers route reads from its request: the ``Servers`` service the app's lifespan
put in ``request.state``, the caller as an ``Actor``, and a server the caller may see."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.servers.history import Actor
from cloudseed.servers.records import ServerRecord
from cloudseed.servers.service import Servers
from cloudseed.web.context import RequestContext
from cloudseed.web.requests import context_of


def servers_of(request: Request) -> Servers:
    servers: Servers = request.state.servers
    return servers


def actor_of(request: Request) -> Actor:
    context = context_of(request)
    return Actor(
        user_id=context.user_id, project_id=context.project_id, request_id=context.request_id
    )


def owned(context: RequestContext, record: ServerRecord) -> ServerRecord:
    """Another project's server does not exist, for non-administrators (Nova's 404)."""
    if not context.is_admin and record.instance.project_id != context.project_id:
        raise InstanceNotFound(record.instance.uuid)
    return record


async def load_owned(request: Request) -> ServerRecord:
    servers, uuid = servers_of(request), request.path_params["server_id"]
    return owned(context_of(request), await run_in_threadpool(servers.get, uuid))
