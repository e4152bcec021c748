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
from cloudseed.servers.api.project_resources import check_admin, check_reader, project_in_path
from cloudseed.servers.api.requests import actor_of, servers_of
from cloudseed.servers.live_keys import project as project_keys
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys.schemas import LIVE_KEYS, PROJECT_KEYS
from cloudseed.web.requests import api_db_of, body_of, settings_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction

POLICY = "cloudseed:os-project-keys:{}"


async def show(request: Request) -> Response:
    project_id = project_in_path(request, LIVE_KEYS)
    check_reader(request, project_id, POLICY)
    db = api_db_of(request)

    keys = await in_transaction(db, lambda session: project_keys.listed(session, project_id))
    return JSONResponse({"project_keys": [k.body() for k in keys]})


async def update(request: Request) -> Response:
    project_id = project_in_path(request, LIVE_KEYS)
    body = await body_of(request, PROJECT_KEYS)  # first, as Nova's schema decorator
    check_admin(request, POLICY)
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
