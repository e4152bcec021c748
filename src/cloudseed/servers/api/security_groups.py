"""A server's security groups (servers/lifecycle/security_groups.py): the ``addSecurityGroup`` and
``removeSecurityGroup`` actions, and ``GET /v2.1/servers/{id}/os-security-groups``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from cloudseed.errors import InvalidInput
from cloudseed.servers import views
from cloudseed.servers.api.requests import in_cell, load_owned
from cloudseed.servers.lifecycle import security_groups
from cloudseed.web.requests import context_of
from cloudseed.web.responses import JSONResponse
from cloudseed.web.validation import validate


def _action_schema(action: str) -> dict[str, Any]:
    # Nova's schemas/security_groups.py add_security_group / remove_security_group.
    return {
        "type": "object",
        "properties": {
            action: {
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1}},
                "required": ["name"],
                "additionalProperties": False,
            }
        },
        "required": [action],
        "additionalProperties": True,
    }


ADD = _action_schema("addSecurityGroup")
REMOVE = _action_schema("removeSecurityGroup")


async def add(request: Request, body: dict[str, Any]) -> Response:
    validate(ADD, body)
    return await _change(request, body["addSecurityGroup"]["name"], security_groups.add)


async def remove(request: Request, body: dict[str, Any]) -> Response:
    validate(REMOVE, body)
    return await _change(request, body["removeSecurityGroup"]["name"], security_groups.remove)


async def _change(request: Request, name: str, change: Callable[..., None]) -> Response:
    uuid = (await load_owned(request)).instance.uuid
    if not name.strip():
        raise InvalidInput("Security group name cannot be empty")
    project_id = context_of(request).project_id

    def work(session: Session) -> None:
        change(session, uuid, name, project_id=project_id)

    await in_cell(request, uuid, work, write=True)
    return Response(status_code=202)


async def index(request: Request) -> Response:
    record = await load_owned(request)
    return JSONResponse({"security_groups": views.security_groups_detailed(record)})
