"""Acknowledged lifecycle notices (2.111) in the API: the notice a reboot, os-stop, rebuild or
DELETE asks for (``notice_seconds`` in the action's body, a query parameter of DELETE), else its
project's default, and the defaults themselves (``/os-lifecycle-notice-defaults/{project_id}``).

The defaults apply at every microversion, as the metadata options' defaults do: an operator
who sets them wants every request of the project's users noticed, whatever their client
speaks; a request from 2.111 on may name its own notice, 0 for none. Policy, as the metadata
options' defaults: an administrator, or a reader or member of the project, reads them; only
an administrator replaces them. Below 2.111 the resource does not exist (404).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from cloudseed.errors import InvalidInput
from cloudseed.servers.notices import rules
from cloudseed.servers.notices import store as notices
from cloudseed.servers.records import ServerRecord
from cloudseed.web.errors import PolicyNotAuthorized, ResourceNotFound
from cloudseed.web.requests import api_db_of, body_of, context_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import bounded_int

POLICY = "cloudseed:os-lifecycle-notice-defaults:{}"
PROJECT_ROLES = frozenset({"reader", "member"})
NAME = "notice_seconds"
# os-stop's body from 2.111: as before any object (Nova does not look at it), and a notice.
STOP: dict[str, Any] = {"type": ["object", "null"], "properties": {NAME: rules.NOTICE_SECONDS}}


def with_notice(properties: dict[str, Any], version: Any) -> dict[str, Any]:
    """An action body's properties, with ``notice_seconds`` from 2.111."""
    if version >= rules.NOTICES_SINCE:
        return {**properties, NAME: rules.NOTICE_SECONDS}
    return properties


async def notice_of(request: Request, record: ServerRecord, kind: str, asked: object) -> int:
    """The notice an operation of ``kind`` on ``record``'s server gets: ``asked`` (validated by
    the schema, or DELETE's query parameter) when given, else its project's default."""
    if asked is not None:
        return bounded_int(asked, NAME, minimum=0, maximum=rules.MAX_NOTICE_SECONDS)
    project_id = record.instance.project_id
    defaults = await in_transaction(
        api_db_of(request), lambda session: notices.project_defaults(session, project_id)
    )
    return defaults.get(rules.TYPES[kind], 0)


def delete_notice(request: Request) -> str | None:
    """DELETE's ``?notice_seconds=N`` from 2.111 (ignored below, as any query parameter)."""
    if version_of(request) < rules.NOTICES_SINCE:
        return None
    values = request.query_params.getlist(NAME)
    if len(values) > 1:
        raise InvalidInput(f"{NAME} may be given once.")
    return values[0] if values else None


def _project(request: Request) -> str:
    if version_of(request) < rules.NOTICES_SINCE:
        raise ResourceNotFound()
    project_id: str = request.path_params["id"]
    return project_id


async def defaults_show(request: Request) -> Response:
    project_id = _project(request)
    context = context_of(request)
    member = context.project_id == project_id and bool(context.roles & PROJECT_ROLES)
    if not (context.is_admin or member):
        raise PolicyNotAuthorized(POLICY.format("show"))
    found = await in_transaction(
        api_db_of(request), lambda session: notices.project_defaults(session, project_id)
    )
    return JSONResponse({"lifecycle_notices": rules.defaults_view(found)})


async def defaults_update(request: Request) -> Response:
    project_id = _project(request)
    body = await body_of(request, rules.DEFAULTS_BODY)
    if not context_of(request).is_admin:
        raise PolicyNotAuthorized(POLICY.format("update"))
    defaults = rules.defaults_from_body(body["lifecycle_notices"])

    def work(session: Session) -> None:
        notices.set_project_defaults(session, project_id, defaults)

    # Two first PUTs for one project at once: the loser's insert fails, and runs again as an
    # update of the winner's row.
    db = api_db_of(request)
    await run_in_threadpool(lambda: db.run(work, write=True, lost_to=(IntegrityError,)))
    return JSONResponse({"lifecycle_notices": rules.defaults_view(defaults)})
