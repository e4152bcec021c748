"""The bodies that may carry user data (create, update, the action verbs rebuild and reboot):
how large they may be, and ``[api] max_user_data_bytes`` checked before anything decodes it.

Nova refuses user data over 65,535 characters of base64 (its schema's maxLength) and bodies over
``[oslo_middleware] max_request_body_size`` (413). cloudseed's limit is the option, whose
default is Nova's; above it, these requests may be larger than ``max_request_body_size`` by as
much as the option adds, so that a raised limit is usable, and a body larger still is refused
(413) before it is read whole. Every other request keeps ``max_request_body_size``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from starlette.requests import Request

from cloudseed.servers.schemas import NOVA_MAX_USER_DATA
from cloudseed.settings import Settings
from cloudseed.web.requests import settings_of
from cloudseed.web.validation import read_json, validate


def body_limit(settings: Settings) -> int:
    """The largest body a request carrying user data may send, in bytes."""
    extra = max(0, settings.api.max_user_data_bytes - NOVA_MAX_USER_DATA)
    return settings.oslo_middleware.max_request_body_size + extra


def limit_of(request: Request) -> int:
    return settings_of(request).api.max_user_data_bytes


async def read_body(request: Request) -> Any:
    """The JSON body of a request that may carry user data, within ``body_limit``."""
    return await read_json(request, max_size=body_limit(settings_of(request)))


async def valid_body(request: Request, schema: dict[str, Any], key: str) -> dict[str, Any]:
    """``read_body``, with ``body[key]``'s user data checked first, then the whole schema."""
    body = await read_body(request)
    check_length(body.get(key) if isinstance(body, dict) else None, limit_of(request))
    validate(schema, body)
    result: dict[str, Any] = body
    return result


@cache
def _length_only(limit: int) -> dict[str, Any]:
    # One object per limit: web/validation.py keys its compiled validators by the schema's id.
    return {"type": "object", "properties": {"user_data": {"maxLength": limit}}}


def check_length(params: object, limit: int) -> None:
    """A ``user_data`` in ``params`` longer than ``limit`` refused with the 400 the whole
    schema gives (Nova's message, from the same maxLength), before the schema runs: its
    base64 check decodes the value, which an over-long one is not worth."""
    if isinstance(params, dict):
        value = params.get("user_data")
        if isinstance(value, str) and len(value) > limit:
            validate(_length_only(limit), {"user_data": value})
