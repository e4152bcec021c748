"""``GET /v2.1/servers/{id}/config-drive?format=ironic|ironic-json`` (2.108, administrators):
a server's config drive in the forms Ironic takes for a bare-metal node (``ironic.py``).

The answer is ``{"config_drive": {"format": ..., "configdrive": ...}}``, where ``configdrive``
is the value of Ironic's own field of that name (``PUT /v1/nodes/{node}/states/provision``):
the gzipped ISO's base64 text, or the JSON form's object. The drive is built as the compute
agent builds the server's own, from the same record and vendordata; the admin password and
personality files, which are stored nowhere but in the drive on the server's compute host, are
taken from that drive when this node holds it (the embedded deployment), as
``cloudseed configdrive build`` does.

Policy: administrators only (the drive holds the admin password; Nova's default for what
reaches Ironic). The check comes before the server is looked up, so a non-administrator learns
nothing about which servers exist. Below 2.108 the resource does not exist (404).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.configdrive import ironic, schemas
from cloudseed.configdrive.service import DriveBuilder
from cloudseed.servers.api.requests import load_owned
from cloudseed.web.errors import PolicyNotAuthorized, ResourceNotFound
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import context_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.state import fragment_of
from cloudseed.web.validation import query_lists, validate

IRONIC_FORMS = APIVersion(2, 108)
POLICY = "cloudseed:servers:config-drive:show"


@dataclass(frozen=True)
class ConfigDriveState:
    """The builder of the API's drives (its vendordata client started on first use)."""

    drives: DriveBuilder


async def show(request: Request) -> Response:
    if version_of(request) < IRONIC_FORMS:
        raise ResourceNotFound()
    if not context_of(request).is_admin:
        raise PolicyNotAuthorized(POLICY)
    query = {name: values[-1] for name, values in query_lists(request).items()}
    validate(schemas.SHOW_QUERY, query, query=True)
    fmt = query["format"]
    uuid = (await load_owned(request)).instance.uuid
    drives = fragment_of(request, ConfigDriveState).drives

    def build() -> str | dict[str, Any]:
        return ironic.render(fmt, drives.carried_tree_for(uuid))

    form = await run_in_threadpool(build)
    return JSONResponse({"config_drive": {"format": fmt, "configdrive": form}})


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [Route("/servers/{server_id}/config-drive", show, methods=["GET"])]
