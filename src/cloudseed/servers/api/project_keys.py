"""``/v2.1/os-project-keys/{project_id}`` (2.106): the keys every server of a project gets.

Policy, fixed as Nova's defaults for per-project resources (os-quota-sets): an administrator, or
a reader or member of the project itself, may list them; only an administrator may replace
them. Below 2.106 the resource does not exist (404), as any microversioned resource in Nova.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from cloudseed.db.base import utcnow
from cloudseed.servers.api.requests import actor_of, servers_of
from cloudseed.servers.live_keys import project as project_keys
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys.schemas import LIVE_KEYS, PROJECT_KEYS
from cloudseed.web.errors import PolicyNotAuthorized, ResourceNotFound
from cloudseed.web.requests import api_db_of, body_of, context_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction

POLICY = "cloudseed:os-project-keys:{}"
PROJECT_ROLES = frozenset({"reader", "member"})


def _project(request: Request) -> str:
    if version_of(request) < LIVE_KEYS:
        raise ResourceNotFound()
    project_id: str = request.path_params["id"]
    return project_id


async def show(request: Request) -> Response:
    project_id = _project(request)
    context = context_of(request)
    member = context.project_id == project_id and bool(context.roles & PROJECT_ROLES)
    if not (context.is_admin or member):
        raise PolicyNotAuthorized(POLICY.format("show"))
    db = api_db_of(request)

    keys = await in_transaction(db, lambda session: project_keys.listed(session, project_id))
    return JSONResponse({"project_keys": [k.body() for k in keys]})


async def update(request: Request) -> Response:
    project_id = _project(request)
    body = await body_of(request, PROJECT_KEYS)  # first, as Nova's schema decorator
    if not context_of(request).is_admin:
        raise PolicyNotAuthorized(POLICY.format("update"))
    requests = key_sets.project_key_requests(
        body["project_keys"], now=utcnow(), limit=settings_of(request).api.max_keys_per_server
    )
    servers, actor = servers_of(request), actor_of(request)
    keys, _changed = await run_in_threadpool(
        lambda: project_keys.replace(
            servers.api_db, servers.cells, project_id, requests, actor=actor
        )
    )
    return JSONResponse({"project_keys": [k.body() for k in keys]})
