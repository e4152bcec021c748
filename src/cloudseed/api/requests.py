"""What the edge attached to a request, for route handlers: the caller and the microversion."""

from __future__ import annotations

from starlette.requests import Request

from cloudseed.api.auth import CONTEXT_KEY
from cloudseed.api.context import RequestContext
from cloudseed.api.edge import VERSION_KEY
from cloudseed.api.microversions import APIVersion
from cloudseed.errors import InvalidInput


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
