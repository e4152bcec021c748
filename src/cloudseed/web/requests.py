"""What a route handler reads from its request: the caller, the microversion, the shared
state the app's lifespan built, and the request body.

The lifespan's state is typed (``web/state.py``): the toolkit reads its own fragment,
``WebState`` (settings and the API database, which every domain needs); a domain reads its own
fragment with its own accessor (``servers.api.requests.servers_of``), so no type here names a
domain class.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from cloudseed.db.engines import Database
from cloudseed.errors import InvalidInput
from cloudseed.settings import Settings
from cloudseed.web.context import CONTEXT_KEY, VERSION_KEY, RequestContext
from cloudseed.web.links import base_url
from cloudseed.web.microversions import APIVersion
from cloudseed.web.state import WebState, fragment_of
from cloudseed.web.validation import read_json, validate


def context_of(request: Request) -> RequestContext:
    """The caller; a project id in the URL must be the caller's own, as in Nova."""
    context: RequestContext = request.scope[CONTEXT_KEY]
    url_project = request.path_params.get("project_id")
    if url_project is not None and url_project != context.project_id:
        raise InvalidInput(
            f"Malformed request URL: URL's project_id '{url_project}' doesn't "
            f"match Context's project_id '{context.project_id}'"
        )
    return context


def version_of(request: Request) -> APIVersion:
    version: APIVersion = request.scope[VERSION_KEY]
    return version


def settings_of(request: Request) -> Settings:
    return fragment_of(request, WebState).settings


def api_db_of(request: Request) -> Database:
    return fragment_of(request, WebState).api_db


def api_base(request: Request) -> str:
    """``<root>/v2.1`` (plus ``/<project_id>`` when the URL had one): the base of self links."""
    prefix = settings_of(request).api.compute_link_prefix
    project = request.path_params.get("project_id")
    return base_url(request, prefix) + "/v2.1" + (f"/{project}" if project else "")


async def body_of(request: Request, schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON body, within ``max_request_body_size`` and valid against ``schema``."""
    body = await read_json(
        request, max_size=settings_of(request).oslo_middleware.max_request_body_size
    )
    validate(schema, body)
    result: dict[str, Any] = body
    return result
