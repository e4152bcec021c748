"""What cloudseed's per-project resources share (project keys, 2.106; the metadata options'
defaults, 2.109; the lifecycle notices' defaults, 2.111): the project named in the path, which
exists from the resource's microversion on (404 below), and one policy: an administrator, or
a reader or member of the project, reads; only an administrator replaces."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from cloudseed.web.errors import PolicyNotAuthorized, ResourceNotFound
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import api_db_of, context_of, version_of

PROJECT_ROLES = frozenset({"reader", "member"})


def project_in_path(request: Request, since: APIVersion) -> str:
    """The path's project id; 404 below ``since``."""
    if version_of(request) < since:
        raise ResourceNotFound()
    project_id: str = request.path_params["id"]
    return project_id


def check_reader(request: Request, project_id: str, policy: str) -> None:
    """403 (``policy`` formatted with "show") unless the caller may read the project's."""
    context = context_of(request)
    member = context.project_id == project_id and bool(context.roles & PROJECT_ROLES)
    if not (context.is_admin or member):
        raise PolicyNotAuthorized(policy.format("show"))


def check_admin(request: Request, policy: str) -> None:
    """403 (``policy`` formatted with "update") unless the caller is an administrator."""
    if not context_of(request).is_admin:
        raise PolicyNotAuthorized(policy.format("update"))


async def replace_defaults(request: Request, work: Callable[[Session], None]) -> None:
    """Run ``work``, which writes a project's defaults row, in the API database. Two first PUTs
    for one project at once: the loser's insert fails, and runs again as an update of the
    winner's row."""
    db = api_db_of(request)
    await run_in_threadpool(lambda: db.run(work, write=True, lost_to=(IntegrityError,)))
