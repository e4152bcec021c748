"""``POST /v2.1/servers/{id}/action``: the lifecycle verbs reboot, rebuild, os-stop, os-start,
os-resetState and os-getConsoleOutput (one URL, the verb is the body's only key), and the
security group actions of ``security_groups``."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from cloudseed.errors import Forbidden, InvalidInput
from cloudseed.servers import schemas, views
from cloudseed.servers.api import notices, security_groups
from cloudseed.servers.api.requests import (
    actor_of,
    key_requests_of,
    load_owned,
    load_unlocked,
    servers_of,
)
from cloudseed.servers.api.user_data import check_length, limit_of, read_body
from cloudseed.servers.creation import personality
from cloudseed.servers.creation.service import generate_password
from cloudseed.servers.errors import InstanceInvalidState
from cloudseed.servers.lifecycle import schemas as action_schemas
from cloudseed.servers.lifecycle.edits import UNSET
from cloudseed.servers.lifecycle.rebuild_request import RebuildRequest, own_keys
from cloudseed.servers.notices.rules import NOTICES_SINCE
from cloudseed.web.microversions import APIVersion
from cloudseed.web.requests import api_base, context_of, settings_of, version_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.validation import bounded_int, validate

V = APIVersion


async def action(request: Request) -> Response:
    body = await read_body(request)  # rebuild and reboot may carry user data
    if not isinstance(body, dict) or len(body) != 1:
        raise InvalidInput("Malformed request body")
    name = next(iter(body))
    handler = HANDLERS.get(name)
    if handler is None:
        await load_owned(request)  # a server that is not there is a 404 first, as in Nova
        raise InvalidInput(f"There is no such action: {name}")
    return await handler(request, body)


async def _reboot(request: Request, body: dict[str, Any]) -> Response:
    version = version_of(request)
    limit = limit_of(request)
    check_length(body["reboot"], limit)
    validate(schemas.reboot(version, limit), body)
    params = body["reboot"]
    hard = params["type"].upper() == "HARD"
    user_data = params.get("user_data", UNSET)
    if user_data is not UNSET and not hard:
        raise InvalidInput("user_data can only be changed with a HARD reboot.")
    record = await load_unlocked(request)
    kind = "reboot_hard" if hard else "reboot_soft"
    notice = await notices.notice_of(request, record, kind, params.get(notices.NAME))
    await run_in_threadpool(
        lambda: servers_of(request).reboot(
            record.instance.uuid,
            actor=actor_of(request),
            hard=hard,
            user_data=user_data,
            notice_seconds=notice,
        )
    )
    return Response(status_code=202)


async def _rebuild(request: Request, body: dict[str, Any]) -> Response:
    version, context = version_of(request), context_of(request)
    limit = limit_of(request)
    check_length(body["rebuild"], limit)
    validate(schemas.rebuild(version, limit), body)
    params = body["rebuild"]
    key_names = own_keys(params.get("key_name", UNSET), key_requests_of(request, params))
    record = await load_unlocked(request)
    notice = await notices.notice_of(request, record, "rebuild", params.get(notices.NAME))
    admin_pass = params.get("adminPass") or generate_password()
    rebuild = RebuildRequest(
        image_ref=params["imageRef"],
        actor=actor_of(request),
        admin=context.is_admin,
        name=params.get("name"),
        metadata=params.get("metadata"),
        hostname=params.get("hostname"),
        description=params.get("description", UNSET),
        user_data=params.get("user_data", UNSET),
        access_ip_v4=params.get("accessIPv4"),
        access_ip_v6=schemas.ipv6_text(params.get("accessIPv6")),
        key_names=key_names,
        admin_password=admin_pass,
        files=personality.from_request(params.get("personality")),
        quota=settings_of(request).quota,
        notice_seconds=notice,
    )
    rebuilt = await run_in_threadpool(
        lambda: servers_of(request).rebuild(record.instance.uuid, rebuild)
    )
    view = views.rebuilt(
        rebuilt, version, api_base(request), admin=context.is_admin, admin_password=admin_pass
    )
    return JSONResponse(view, status_code=202)


async def _stop(request: Request, body: dict[str, Any]) -> Response:
    params = body["os-stop"]
    noticed = version_of(request) >= NOTICES_SINCE
    validate(notices.STOP if noticed else action_schemas.EMPTY_ACTION, params)
    record = await load_unlocked(request)
    asked = params.get(notices.NAME) if noticed and isinstance(params, dict) else None
    notice = await notices.notice_of(request, record, "stop", asked)
    await run_in_threadpool(
        lambda: servers_of(request).stop(
            record.instance.uuid, actor=actor_of(request), notice_seconds=notice
        )
    )
    return Response(status_code=202)


async def _start(request: Request, body: dict[str, Any]) -> Response:
    validate(action_schemas.EMPTY_ACTION, body["os-start"])
    record = await load_unlocked(request)
    await run_in_threadpool(
        lambda: servers_of(request).start(record.instance.uuid, actor=actor_of(request))
    )
    return Response(status_code=202)


async def _reset_state(request: Request, body: dict[str, Any]) -> Response:
    """``os-resetState`` (admin): Nova's body and rules; also cancels the open operation."""
    validate(action_schemas.RESET_STATE, body)
    if not context_of(request).is_admin:
        raise Forbidden(
            "Policy doesn't allow os_compute_api:os-admin-actions:reset_state to be performed."
        )
    record = await load_owned(request)
    state = body["os-resetState"]["state"]
    await run_in_threadpool(
        lambda: servers_of(request).reset_state(
            record.instance.uuid, actor=actor_of(request), state=state
        )
    )
    return Response(status_code=202)


async def _console_output(request: Request, body: dict[str, Any]) -> Response:
    params = body["os-getConsoleOutput"]
    validate(action_schemas.CONSOLE_OUTPUT, params)
    raw = params.get("length")
    number = None if raw is None else bounded_int(raw, "length", minimum=-1)
    length = None if number is None or number == -1 else number
    record = await load_owned(request)
    output = await run_in_threadpool(
        lambda: servers_of(request).console_output(record.instance.uuid, length=length)
    )
    return JSONResponse({"output": output})


async def _lock(request: Request, body: dict[str, Any]) -> Response:
    validate(action_schemas.lock(version_of(request)), body["lock"])
    params = body["lock"] if isinstance(body["lock"], dict) else {}
    if version_of(request) < V(2, 73):
        params = {}
    record = await load_owned(request)
    context = context_of(request)
    await run_in_threadpool(
        lambda: servers_of(request).lock(
            record.instance.uuid,
            actor=actor_of(request),
            by_admin=context.is_admin and context.project_id != record.instance.project_id,
            reason=params.get("locked_reason"),
        )
    )
    return Response(status_code=202)


async def _unlock(request: Request, body: dict[str, Any]) -> Response:
    record = await load_owned(request)
    await run_in_threadpool(
        lambda: servers_of(request).unlock(
            record.instance.uuid, actor=actor_of(request), by_admin=context_of(request).is_admin
        )
    )
    return Response(status_code=202)


async def _not_soft_deleted(request: Request, body: dict[str, Any]) -> Response:
    """``restore`` and ``forceDelete`` act on SOFT_DELETED servers; cloudseed deletes at once
    (Nova with ``reclaim_instance_interval = 0``), so every server is in the wrong state: 409."""
    record = await load_owned(request)
    operation = "restore" if "restore" in body else "force_delete"
    raise InstanceInvalidState(
        uuid=record.instance.uuid,
        operation=operation,
        attr="vm_state",
        state=record.instance.vm_state,
    )


async def _inject_network_info(request: Request, body: dict[str, Any]) -> Response:
    """``injectNetworkInfo`` (admin): accepted and nothing to do. Guests read their network
    from the metadata service or the config drive, which always show the current ports."""
    if not context_of(request).is_admin:
        raise Forbidden(
            "Policy doesn't allow os_compute_api:os-admin-actions:inject_network_info to be "
            "performed."
        )
    await load_owned(request)
    return Response(status_code=202)


HANDLERS = {
    "restore": _not_soft_deleted,
    "forceDelete": _not_soft_deleted,
    "injectNetworkInfo": _inject_network_info,
    "lock": _lock,
    "unlock": _unlock,
    "reboot": _reboot,
    "rebuild": _rebuild,
    "os-stop": _stop,
    "os-start": _start,
    "os-getConsoleOutput": _console_output,
    "os-resetState": _reset_state,
    "addSecurityGroup": security_groups.add,
    "removeSecurityGroup": security_groups.remove,
}
