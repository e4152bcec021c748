"""``/v2.1/os-quota-sets/{project}``: show, detail (with usage), defaults, update and delete,
as Nova's quota_sets controller (bodies per microversion: 2.36 drops the network resources,
2.57 the personality ones).

Usage is counted by whoever knows the instances: the app hands in a counter (``api/app.py``
wires ``servers.quota.usages``) under the ``quota_usage`` state key, so this package stays
below servers and cells.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.quotas import schemas, service
from cloudseed.quotas.errors import InvalidQuotaLimit
from cloudseed.web.context import RequestContext
from cloudseed.web.errors import PolicyNotAuthorized
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import api_db_of, body_of, context_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.state import fragment_of
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import query_lists, validate

V2_36, V2_57, V2_75 = APIVersion(2, 36), APIVersion(2, 57), APIVersion(2, 75)
POLICY = "os_compute_api:os-quota-sets:{}"

# (project_id, user_id or None) -> {"instances": n, "cores": n, "ram": n}
UsageCounter = Callable[[str, str | None], dict[str, int]]


@dataclass(frozen=True)
class QuotasState:
    """The quota routes' fragment of the app's state (``web/state.py``): the usage counter,
    which the app wires in from the servers (quotas sit below servers and cells)."""

    usage: UsageCounter


def usage_of(request: Request) -> UsageCounter:
    return fragment_of(request, QuotasState).usage


def _shown(version: APIVersion) -> tuple[str, ...]:
    if version >= V2_57:
        return schemas.RESOURCES_V257
    if version >= V2_36:
        return schemas.RESOURCES_V236
    return service.RESOURCES


def _authorize(context: RequestContext, action: str, project_id: str | None = None) -> None:
    """Nova's defaults: show and detail for the project's members and admins; update and
    delete for admins; defaults for anyone."""
    if context.is_admin or (project_id is not None and context.project_id == project_id):
        return
    raise PolicyNotAuthorized(POLICY.format(action))


def _user_id(request: Request) -> str | None:
    version = version_of(request)
    query = query_lists(request)
    validate(schemas.QUERY_V275 if version >= V2_75 else schemas.QUERY, query, query=True)
    values = query.get("user_id")
    return values[0] if values and values[0] else None


def _limits(request: Request, project_id: str, user_id: str | None) -> dict[str, int]:
    quota = settings_of(request).quota
    return api_db_of(request).run(
        lambda session: service.limits(session, quota, project_id=project_id, user_id=user_id)
    )


async def show(request: Request) -> Response:
    project_id = request.path_params["id"]
    _authorize(context_of(request), "show", project_id)
    user_id = _user_id(request)
    values = await run_in_threadpool(_limits, request, project_id, user_id)
    body = {"id": project_id, **{r: values[r] for r in _shown(version_of(request))}}
    return JSONResponse({"quota_set": body})


async def detail(request: Request) -> Response:
    project_id = request.path_params["id"]
    _authorize(context_of(request), "detail", project_id)
    user_id = _user_id(request)
    counter = usage_of(request)

    def load() -> tuple[dict[str, int], dict[str, int]]:
        return _limits(request, project_id, user_id), counter(project_id, user_id)

    values, used = await run_in_threadpool(load)
    body: dict[str, Any] = {"id": project_id}
    for resource in _shown(version_of(request)):
        body[resource] = {
            "in_use": used.get(resource, 0),
            "limit": values[resource],
            "reserved": 0,
        }
    return JSONResponse({"quota_set": body})


async def defaults(request: Request) -> Response:
    project_id = request.path_params["id"]
    context_of(request)  # authenticated; Nova's rule is "any"
    validate(schemas.DEFAULTS_QUERY, query_lists(request), query=True)
    values = service.defaults(settings_of(request).quota)
    body = {"id": project_id, **{r: values[r] for r in _shown(version_of(request))}}
    return JSONResponse({"quota_set": body})


def _limits_of(body: dict[str, Any]) -> dict[str, int]:
    """The body's limits as ints, each -1 or within the column's range. The schema bounds a
    JSON integer but only the length of a string of digits, so a string is converted (at most
    11 characters: cheap) and checked here, before anything is read or written, whatever
    ``force`` says: a value the column cannot hold was a 500 on PostgreSQL and stored as given
    on SQLite. Nova's messages (its quota_sets controller's ``_validate_quota_limit``)."""
    values: dict[str, int] = {}
    for resource, given in body.items():
        if resource == "force":
            continue
        value = int(given)
        if value < service.UNLIMITED:
            raise InvalidQuotaLimit(f"Quota limit {value} for {resource} must be -1 or greater.")
        if value > schemas.MAX_LIMIT:
            raise InvalidQuotaLimit(
                f"Quota limit {value} for {resource} must be less than or equal to "
                f"{schemas.MAX_LIMIT}."
            )
        values[resource] = value
    return values


async def update(request: Request) -> Response:
    project_id = request.path_params["id"]
    _authorize(context_of(request), "update")
    version = version_of(request)
    schema = (
        schemas.UPDATE_V257
        if version >= V2_57
        else schemas.UPDATE_V236
        if version >= V2_36
        else schemas.UPDATE
    )
    user_id = _user_id(request)
    body = (await body_of(request, schema))["quota_set"]
    force = str(body.get("force", "False")).lower() in ("true", "1", "on", "yes")
    values = _limits_of(body)
    quota, db, counter = settings_of(request).quota, api_db_of(request), usage_of(request)

    used = await run_in_threadpool(counter, project_id, user_id) if not force else {}

    def write(session: Session) -> dict[str, int]:
        service.set_limits(
            session, quota, values, project_id=project_id, user_id=user_id, usages=used, force=force
        )
        return service.limits(session, quota, project_id=project_id, user_id=user_id)

    limits = await in_transaction(db, write, write=True)
    return JSONResponse({"quota_set": {r: limits[r] for r in _shown(version)}})


async def delete(request: Request) -> Response:
    project_id = request.path_params["id"]
    _authorize(context_of(request), "delete")
    user_id = _user_id(request)
    db = api_db_of(request)

    def write(session: Session) -> None:
        service.delete_limits(session, project_id=project_id, user_id=user_id)

    await in_transaction(db, write, write=True)
    return Response(status_code=202)


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [
    Route("/os-quota-sets/{id}", show, methods=["GET"]),
    Route("/os-quota-sets/{id}", update, methods=["PUT"]),
    Route("/os-quota-sets/{id}", delete, methods=["DELETE"]),
    Route("/os-quota-sets/{id}/detail", detail, methods=["GET"]),
    Route("/os-quota-sets/{id}/defaults", defaults, methods=["GET"]),
]
