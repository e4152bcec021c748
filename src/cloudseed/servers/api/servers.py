"""``/v2.1/servers``: create, list, show, update, delete."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from cloudseed.errors import InvalidInput
from cloudseed.servers import schemas, views
from cloudseed.servers.api import notices
from cloudseed.servers.api.requests import (
    actor_of,
    in_cell,
    key_requests_of,
    load_owned,
    load_unlocked,
    servers_of,
    unlocked,
)
from cloudseed.servers.api.user_data import limit_of, valid_body
from cloudseed.servers.creation import personality, scheduler_hints
from cloudseed.servers.creation.service import CreateRequest, create_servers
from cloudseed.servers.lifecycle import edits, security_groups
from cloudseed.servers.lifecycle.edits import UNSET
from cloudseed.servers.listing import ListFilter, list_server_names, list_servers
from cloudseed.servers.live_keys import store as live_keys
from cloudseed.servers.metadata_options import options as metadata_options
from cloudseed.servers.metadata_options import store as metadata_options_store
from cloudseed.servers.records import ServerRecord
from cloudseed.servers.tags import TagFilter
from cloudseed.web.errors import PolicyNotAuthorized
from cloudseed.web.links import links, next_link
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import (
    api_base,
    api_db_of,
    context_of,
    settings_of,
    version_of,
)
from cloudseed.web.responses import JSONResponse
from cloudseed.web.transactions import in_transaction
from cloudseed.web.validation import bounded_int, query_lists

V = APIVersion


async def create(request: Request) -> Response:
    version, context = version_of(request), context_of(request)
    settings = settings_of(request)
    limit = settings.api.max_user_data_bytes
    body = await valid_body(request, schemas.create(version, limit), "server")
    server = body["server"]
    # Both bounded before anything else: an absurd count costs nothing (issue 13).
    bound = settings.api.max_count_per_request
    min_count = _count(server, "min_count", 1, bound)
    max_count = _count(server, "max_count", min_count, bound)
    if min_count > max_count:
        raise InvalidInput("min_count must be <= max_count")
    image_ref = schemas.boot_image(
        server.get("block_device_mapping_v2", []), server.get("imageRef")
    )
    if not image_ref:
        raise InvalidInput("Missing imageRef attribute")
    create_request = CreateRequest(
        name=server["name"],
        flavor_ref=str(server["flavorRef"]),
        image_ref=image_ref,
        actor=actor_of(request),
        roles=context.roles,
        key_name=server.get("key_name"),
        key_names=key_requests_of(request, server),
        block_project_keys=schemas.true_value(server.get("block_project_keys", False)),
        user_data=server.get("user_data"),
        metadata=server.get("metadata", {}),
        config_drive=schemas.true_value(server.get("config_drive", False)),
        hostname=server.get("hostname"),
        description=server.get("description"),
        availability_zone=server.get("availability_zone"),
        requested_host=server.get("host"),
        requested_node=server.get("hypervisor_hostname"),
        access_ip_v4=server.get("accessIPv4"),
        access_ip_v6=schemas.ipv6_text(server.get("accessIPv6")),
        networks=server.get("networks"),
        tags=tuple(server.get("tags", ())),
        count=max_count,
        min_count=min_count,
        admin_pass=server.get("adminPass"),
        files=personality.from_request(server.get("personality")),
        scheduler_hints=scheduler_hints.from_body(body),
        security_groups=security_groups.requested(
            server.get("security_groups", []), project_id=context.project_id
        ),
        metadata_options=metadata_options.from_body(server.get("metadata_options")),
    )
    servers = servers_of(request)
    created = await run_in_threadpool(
        create_servers,
        api_db_of(request),
        servers.cells,
        create_request,
        settings=settings,
    )
    if schemas.true_value(server.get("return_reservation_id", False)):
        return JSONResponse({"reservation_id": created.reservation_id}, status_code=202)
    uuid = created.uuids[0]
    server_links = links(api_base(request), "servers", uuid)
    body_out = {
        "server": {
            "id": uuid,
            "links": server_links,
            "OS-DCF:diskConfig": "MANUAL",
            # Nova echoes the request's (its view builder's create()).
            "security_groups": server.get("security_groups", [{"name": "default"}]),
            "adminPass": created.admin_pass,
        }
    }
    return JSONResponse(body_out, status_code=202, headers={"Location": server_links[0]["href"]})


def _count(server: dict[str, Any], field: str, default: int, bound: int) -> int:
    """``min_count``/``max_count`` (an integer or a string of digits; the schema checked the
    form) as an int between 1 and ``[api] max_count_per_request``. A string is measured
    before it is converted, so a number of any length costs nothing, and a string gets the
    same answers an integer gets from the schema."""
    value = server.get(field)
    if value is None:
        return default
    digits = str(value).lstrip("0") if isinstance(value, str) else None
    if digits is not None and len(digits) > len(str(bound)):
        shown = value if len(value) <= 32 else f"{value[:32]}..."
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. Value: {shown}. "
            f"{shown} is greater than the maximum of {bound}"
        )
    number = int(digits or "0") if digits is not None else int(value)
    if number < 1:
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. Value: {value}. "
            f"{value} is less than the minimum of 1"
        )
    if number > bound:
        raise InvalidInput(
            f"Invalid input for field/attribute {field}. Value: {value}. "
            f"{value} is greater than the maximum of {bound}"
        )
    return number


def _parse_time(value: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"Invalid filter field: changes-since. {value}") from exc
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    return parsed


_TRUE_STRINGS = ("1", "t", "true", "on", "y", "yes")
_FALSE_STRINGS = ("0", "f", "false", "off", "n", "no")


def _is_all_tenants(first: dict[str, str]) -> bool:
    """Nova's ``common.is_all_tenants``: absent or false-ish (oslo's strict
    ``bool_from_string``) lists the caller's own project, true-ish or empty all projects (an
    administrator's), anything else is a 400."""
    if "all_tenants" not in first:
        return False
    value = first["all_tenants"]
    if not value:
        return True  # Nova: "The empty string is considered enabling all_tenants"
    lowered = value.strip().lower()
    if lowered in _TRUE_STRINGS:
        return True
    if lowered in _FALSE_STRINGS:
        return False
    acceptable = ", ".join(f"'{s}'" for s in sorted(_TRUE_STRINGS + _FALSE_STRINGS))
    raise InvalidInput(f"Unrecognized value '{value}', acceptable values are: {acceptable}")


def _image_id(value: str) -> str:
    """Nova takes an image id or its URL (``.../images/<id>``)."""
    return value.rstrip("/").rsplit("/", 1)[-1]


async def _list(request: Request, *, detail: bool) -> Response:
    version, context = version_of(request), context_of(request)
    query = query_lists(request)
    first = {k: v[-1] for k, v in query.items()}
    all_projects = _is_all_tenants(first)
    if all_projects and not context.is_admin:
        raise PolicyNotAuthorized("os_compute_api:servers:index:get_all_tenants")
    max_limit = settings_of(request).api.max_limit
    limit = max_limit
    if "limit" in first:
        try:
            limit = min(max_limit, bounded_int(first["limit"], "limit"))
        except InvalidInput as exc:
            raise InvalidInput("limit param must be an integer") from exc
    if limit < 0:
        raise InvalidInput("limit param must be positive")
    # Administrators' filters, as in Nova: a project (only with all_tenants; without it the
    # admin's own project is listed whatever tenant_id says) and a host; others never see them.
    project_id: str | None = context.project_id
    if all_projects:
        project_id = first.get("tenant_id") or first.get("project_id")
    flt = ListFilter(
        project_id=project_id,
        host=first.get("host") if context.is_admin else None,
        name=first.get("name"),
        key_name=first.get("key_name"),
        status=first.get("status"),
        image=_image_id(first["image"]) if "image" in first else None,
        flavor=first.get("flavor"),
        ip=first.get("ip"),
        ip6=first.get("ip6"),
        reservation_id=first.get("reservation_id"),
        changes_since=_parse_time(first["changes-since"]) if "changes-since" in first else None,
        tags=TagFilter.from_query(first, version),
        limit=limit,
        marker=first.get("marker"),
    )
    cells = servers_of(request).cells
    base = api_base(request)
    if detail:
        found = await run_in_threadpool(list_servers, cells, flt)
        items = [
            views.show(r, version, base, admin=context.is_admin, with_server_groups=False)["server"]
            for r in found
        ]
        uuids = [r.instance.uuid for r in found]
    else:
        listed = await run_in_threadpool(list_server_names, cells, flt)
        items = [views.listed(s.uuid, s.name, base) for s in listed]
        uuids = [s.uuid for s in listed]
    body: dict[str, Any] = {"servers": items}
    if limit and len(uuids) == limit:
        body["servers_links"] = [
            {
                "rel": "next",
                "href": next_link(
                    request,
                    settings_of(request).api.compute_link_prefix,
                    request.url.path,
                    query,
                    uuids[-1],
                ),
            }
        ]
    return JSONResponse(body)


async def index(request: Request) -> Response:
    return await _list(request, detail=False)


async def detail(request: Request) -> Response:
    return await _list(request, detail=True)


async def show(request: Request) -> Response:
    record = await load_owned(request)
    return JSONResponse(
        views.show(
            record, version_of(request), api_base(request), admin=context_of(request).is_admin
        )
    )


async def update(request: Request) -> Response:
    version = version_of(request)
    schema = schemas.update(version, limit_of(request))
    body = (await valid_body(request, schema, "server"))["server"]
    record = await load_owned(request)
    actor = actor_of(request)
    keys = await _key_change(request, body, record)
    options = body.get("metadata_options")  # 2.109, a change the guest sees: as keys, locked 409
    if options is not None:
        unlocked(context_of(request), record)
    uuid = record.instance.uuid

    def work(session: Session) -> ServerRecord:
        if keys is not None:
            live_keys.change(session, uuid, actor=actor, action="update", **keys)
        if options is not None:
            metadata_options_store.change(session, uuid, options)
        return edits.update(
            session,
            uuid,
            actor=actor,
            name=body.get("name"),
            description=body.get("description", UNSET),
            hostname=body.get("hostname"),
            user_data=body.get("user_data", UNSET),
            access_ip_v4=body.get("accessIPv4"),
            access_ip_v6=schemas.ipv6_text(body.get("accessIPv6")),
            pinned_availability_zone=body.get("pinned_availability_zone", UNSET),
        )

    updated = await in_cell(request, uuid, work, write=True)
    view = views.updated(updated, version, api_base(request), admin=context_of(request).is_admin)
    return JSONResponse(view)


async def _key_change(
    request: Request, body: dict[str, Any], record: ServerRecord
) -> dict[str, Any] | None:
    """A PUT's key change (2.106) as ``live_keys.change``'s arguments: its key pairs (the
    caller's, from the API database) and the reader of the project's keys; None without one.
    A locked server refuses it (409), as it refuses a rebuild."""
    own_requests = key_requests_of(request, body)
    block = schemas.true_value(body["block_project_keys"]) if "block_project_keys" in body else None
    if own_requests is None and block is None:
        return None
    unlocked(context_of(request), record)
    api_db, user_id = api_db_of(request), context_of(request).user_id
    own = None
    if own_requests is not None:
        own = await in_transaction(
            api_db,
            lambda session: live_keys.own_entries(session, user_id=user_id, requests=own_requests),
        )
    return {
        "own": own,
        "project": live_keys.project_reader(api_db, record.instance.project_id),
        "block_project_keys": block,
    }


async def delete(request: Request) -> Response:
    asked = notices.delete_notice(request)  # 2.111: ?notice_seconds=N
    record = await load_unlocked(request)
    notice = await notices.notice_of(request, record, "delete", asked)
    await run_in_threadpool(
        lambda: servers_of(request).delete(
            record.instance.uuid, actor=actor_of(request), notice_seconds=notice
        )
    )
    return Response(status_code=204)
