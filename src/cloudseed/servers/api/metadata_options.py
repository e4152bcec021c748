"""Per-server metadata options (2.109): a project's defaults for its new servers
(``/os-metadata-options-defaults/{project_id}``) and a server's token-less access audit
(``/servers/{id}/metadata-access``). A server's own options are set on create and with
``PUT /servers/{id}`` (``servers.py``).

Policy, as project keys' (2.106): an administrator, or a reader or member of the project,
may read a project's defaults; only an administrator may replace them. A server's audit is
its owner's or an administrator's (another project's server is a 404). Below 2.109 neither
resource exists (404).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from cloudseed.servers.api.project_resources import (
    check_admin,
    check_reader,
    project_in_path,
    replace_defaults,
)
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.metadata_options import options as metadata_options
from cloudseed.servers.metadata_options import schemas as metadata_options_schemas
from cloudseed.servers.metadata_options import store
from cloudseed.web.errors import ResourceNotFound
from cloudseed.web.requests import api_db_of, body_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction

POLICY = "cloudseed:os-metadata-options-defaults:{}"
# The metadata item that required tokens before 2.109 (metadata/facts.py reads it too).
TOKENS_ITEM = ("metadata_http_tokens", "required")


def _at_least_2_109(request: Request) -> None:
    if version_of(request) < metadata_options_schemas.OPTIONS_SINCE:
        raise ResourceNotFound()


async def defaults_show(request: Request) -> Response:
    project_id = project_in_path(request, metadata_options_schemas.OPTIONS_SINCE)
    check_reader(request, project_id, POLICY)
    found = await in_transaction(
        api_db_of(request), lambda session: store.project_defaults(session, project_id)
    )
    return JSONResponse({"metadata_options": found.body()})


async def defaults_update(request: Request) -> Response:
    project_id = project_in_path(request, metadata_options_schemas.OPTIONS_SINCE)
    body = await body_of(request, metadata_options_schemas.DEFAULTS_BODY)
    check_admin(request, POLICY)
    options = metadata_options.from_body(body["metadata_options"])
    await replace_defaults(
        request, lambda session: store.set_project_defaults(session, project_id, options)
    )
    return JSONResponse({"metadata_options": options.body()})


def _isotime(value: dt.datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if value else None


async def access_show(request: Request) -> Response:
    _at_least_2_109(request)
    record = await load_owned(request)
    uuid = record.instance.uuid
    counts = await in_cell(request, uuid, lambda session: store.access_of(session, uuid))
    settings = settings_of(request).metadata
    cloud = metadata_options.CloudDefaults(
        require_token=settings.require_token, hop_limit=settings.hop_limit
    )
    effective = metadata_options.effective(
        store.of_record(record), cloud, tokens_item=TOKENS_ITEM in record.metadata.items()
    )

    def shown(count: int, at: dt.datetime | None) -> dict[str, Any]:
        return {"count": count, "last_at": _isotime(at)}

    c = counts or store.Counts(project_id=record.instance.project_id)
    return JSONResponse(
        {
            "metadata_access": {
                "tokenless_requests": shown(c.tokenless, c.tokenless_at),
                "user_data_reads": shown(c.user_data, c.user_data_at),
                "password_reads": shown(c.password, c.password_at),
                "recorded_every_seconds": settings.access_audit_interval,
                "metadata_options": effective,
            }
        }
    )
