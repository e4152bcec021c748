"""``/v2.1/os-keypairs`` routes: list, show, create/import, delete, for every microversion.

Policy is checked here (the service layer knows nothing of callers); the database work runs in
a worker thread inside one transaction (show, create and delete: on a Core connection, without
a Session, as their service functions run Core statements only).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cloudseed.db.engines import Isolation
from cloudseed.keypairs import schemas, service, views
from cloudseed.web.links import next_link
from cloudseed.web.microversions import APIVersion
from cloudseed.web.policy import authorize_owner_or_admin
from cloudseed.web.requests import api_db_of, context_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import bounded_int, query_lists, read_json, validate

V2_2, V2_10, V2_35, V2_75, V2_92 = (APIVersion(2, n) for n in (2, 10, 35, 75, 92))
POLICY = "os_compute_api:os-keypairs:{}"


def _target_user(request: Request, query: dict[str, list[str]]) -> str:
    """The user whose key pairs are meant: ``?user_id=`` from 2.10 (first value), else the
    caller. An empty value means the caller, as in Nova."""
    if version_of(request) >= V2_10 and query.get("user_id"):
        return query["user_id"][0] or context_of(request).user_id
    return context_of(request).user_id


def _check_query(request: Request, *, index: bool) -> dict[str, list[str]]:
    version = version_of(request)
    query = query_lists(request)
    if version >= V2_75:
        schema = schemas.INDEX_QUERY_V275 if index else schemas.QUERY_V275
    elif index and version >= V2_35:
        schema = schemas.INDEX_QUERY_V235
    elif version >= V2_10:
        schema = schemas.QUERY_V210
    else:
        schema = schemas.QUERY_ANY
    validate(schema, query, query=True)
    return query


async def index(request: Request) -> Response:
    version, query = version_of(request), _check_query(request, index=True)
    user_id = _target_user(request, query)
    authorize_owner_or_admin(context_of(request), POLICY.format("index"), target_user_id=user_id)
    settings, db = settings_of(request), api_db_of(request)
    max_limit = settings.api.max_limit
    limit: int | None = None
    marker: str | None = None
    if version >= V2_35:
        # Like webob's MultiDict, a repeated limit or marker means its last value.
        limit = (
            min(max_limit, bounded_int(query["limit"][-1], "limit"))
            if "limit" in query
            else max_limit
        )
        marker = query["marker"][-1] if "marker" in query else None

    keypairs = await in_transaction(
        db,
        lambda session: service.list_keypair_rows(
            session, user_id=user_id, limit=limit, marker=marker
        ),
    )
    body: dict[str, Any] = {"keypairs": views.index(keypairs, version)}
    if limit and len(keypairs) == limit:
        body["keypairs_links"] = [
            {
                "rel": "next",
                "href": next_link(
                    request,
                    settings.api.compute_link_prefix,
                    request.url.path,
                    query,
                    keypairs[-1][0],  # the name
                ),
            }
        ]
    return JSONResponse(body)


async def create(request: Request) -> Response:
    version, context = version_of(request), context_of(request)
    settings, db = settings_of(request), api_db_of(request)
    body = await read_json(request, max_size=settings.oslo_middleware.max_request_body_size)
    if version >= V2_92:
        schema = schemas.CREATE_V292
    elif version >= V2_10:
        schema = schemas.CREATE_V210
    elif version >= V2_2:
        schema = schemas.CREATE_V22
    else:
        schema = schemas.CREATE_V21
    validate(schema, body)
    params = body["keypair"]
    user_id = params.get("user_id") or context.user_id
    authorize_owner_or_admin(context, POLICY.format("create"), target_user_id=user_id)
    quota = service.Quota(
        default=settings.quota.key_pairs,
        recheck=settings.quota.recheck_quota,
        project_id=context.project_id,
    )
    key_type = params.get("type", "ssh")

    def write(connection: Connection) -> tuple[Any, str | None]:
        if "public_key" in params:
            return service.import_keypair(
                connection,
                user_id=user_id,
                name=params["name"],
                public_key=params["public_key"],
                key_type=key_type,
                quota=quota,
            ), None
        return service.generate_keypair(
            connection,
            user_id=user_id,
            name=params["name"],
            key_type=key_type,
            algorithm=settings.api.keypair_generation_algorithm,
            quota=quota,
        )

    # Serializable: the quota's count and the insert hold together against concurrent imports.
    # Core: a Session cost as much as the statements on this hot path.
    keypair, private_key = await in_transaction(
        db, write, write=True, isolation=Isolation.SERIALIZABLE, core=True
    )
    return JSONResponse(
        views.created(keypair, version, private_key), status_code=201 if version >= V2_2 else 200
    )


async def show(request: Request) -> Response:
    version, query = version_of(request), _check_query(request, index=False)
    user_id = _target_user(request, query)
    authorize_owner_or_admin(context_of(request), POLICY.format("show"), target_user_id=user_id)
    db, name = api_db_of(request), request.path_params["name"]

    return JSONResponse(
        views.shown(
            await in_transaction(
                db,
                lambda connection: service.get_keypair(connection, user_id=user_id, name=name),
                core=True,
            ),
            version,
        )
    )


async def delete(request: Request) -> Response:
    version, query = version_of(request), _check_query(request, index=False)
    user_id = _target_user(request, query)
    authorize_owner_or_admin(context_of(request), POLICY.format("delete"), target_user_id=user_id)
    db, name = api_db_of(request), request.path_params["name"]

    await in_transaction(
        db,
        lambda connection: service.delete_keypair(connection, user_id=user_id, name=name),
        write=True,
        core=True,
    )
    return Response(status_code=204 if version >= V2_2 else 202)


# Below /v2.1: api/app.py serves them there and under /v2.1/{project_id}.
v21_routes = [
    Route("/os-keypairs", index, methods=["GET"]),
    Route("/os-keypairs", create, methods=["POST"]),
    Route("/os-keypairs/{name}", show, methods=["GET"]),
    Route("/os-keypairs/{name}", delete, methods=["DELETE"]),
]
