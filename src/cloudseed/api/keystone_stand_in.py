"""What a noauth2 cloudseed answers at ``/identity`` in Keystone's place: the v3 version
document the openstack CLI fetches before anything else, and project look-ups, so the
clouds.yaml of docs/deployment.md works with nothing else running.

In noauth2 a project is whatever the token names, so every project exists, named as its id
(``openstack quota show PROJECT`` resolves the name here first); the project list holds the
caller's own. With ``auth_strategy = keystone`` there is a real Keystone and nothing here is
served. No token is ever issued: the CLI's ``admin_token`` auth sends ``user:project`` as it
is.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cloudseed.web.links import base_url
from cloudseed.web.requests import context_of, settings_of

PREFIX = "/identity"
VERSION_PATHS = frozenset({PREFIX, f"{PREFIX}/", f"{PREFIX}/v3", f"{PREFIX}/v3/"})
UPDATED = "2020-04-07T00:00:00Z"  # Keystone's date for v3.14; clients do not use it


def version_document(base: str) -> dict[str, Any]:
    return {
        "version": {
            "id": "v3.14",
            "status": "stable",
            "updated": UPDATED,
            "links": [{"rel": "self", "href": f"{base}{PREFIX}/v3/"}],
            "media-types": [
                {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
            ],
        }
    }


def project(project_id: str) -> dict[str, Any]:
    return {
        "id": project_id,
        "name": project_id,
        "domain_id": "default",
        "enabled": True,
        "is_domain": False,
        "parent_id": "default",
        "description": "",
        "tags": [],
    }


async def version(request: Request) -> Response:
    prefix = settings_of(request).api.compute_link_prefix
    return JSONResponse(version_document(base_url(request, prefix)))


async def projects(request: Request) -> Response:
    name = request.query_params.get("name")
    shown = [project(name if name else context_of(request).project_id)]
    return JSONResponse({"projects": shown, "links": {"self": None, "next": None}})


async def show_project(request: Request) -> Response:
    return JSONResponse({"project": project(request.path_params["project_id"])})


routes = [
    *(Route(path, version, methods=["GET"]) for path in sorted(VERSION_PATHS)),
    Route(f"{PREFIX}/v3/projects", projects, methods=["GET"]),
    Route(f"{PREFIX}/v3/projects/{{project_id}}", show_project, methods=["GET"]),
]
