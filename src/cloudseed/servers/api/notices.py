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

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.errors import InvalidInput
from cloudseed.servers.api.project_resources import (
    check_admin,
    check_reader,
    project_in_path,
    replace_defaults,
)
from cloudseed.servers.notices import rules
from cloudseed.servers.notices import store as notices
from cloudseed.servers.records import ServerRecord
from cloudseed.web.requests import api_db_of, body_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import bounded_int

POLICY = "cloudseed:os-lifecycle-notice-defaults:{}"
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


async def defaults_show(request: Request) -> Response:
    project_id = project_in_path(request, rules.NOTICES_SINCE)
    check_reader(request, project_id, POLICY)
    found = await in_transaction(
        api_db_of(request), lambda session: notices.project_defaults(session, project_id)
    )
    return JSONResponse({"lifecycle_notices": rules.defaults_view(found)})


async def defaults_update(request: Request) -> Response:
    project_id = project_in_path(request, rules.NOTICES_SINCE)
    body = await body_of(request, rules.DEFAULTS_BODY)
    check_admin(request, POLICY)
    defaults = rules.defaults_from_body(body["lifecycle_notices"])
    await replace_defaults(
        request, lambda session: notices.set_project_defaults(session, project_id, defaults)
    )
    return JSONResponse({"lifecycle_notices": rules.defaults_view(defaults)})
