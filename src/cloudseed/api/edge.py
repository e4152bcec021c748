"""The outermost layer of the compute API, as pure ASGI middleware.

For every request it assigns a request id, refuses a path or query holding a NUL character
(400: no route can take one, and PostgreSQL cannot even compare it with what it stores),
negotiates the microversion (only under ``/v2.1``: the root version document is outside
microversion control, as in Nova), stamps the version and request-id headers on every response,
turns errors raised before routing (auth, version) into Nova faults, and writes one access-log
line.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid

from cloudseed.types import ASGIApp, Message, Receive, Scope, Send
from cloudseed.web.context import CONTEXT_KEY, REQUEST_ID_KEY, VERSION_KEY
from cloudseed.web.errors import ValidationFailed
from cloudseed.web.faults import fault_parts, is_glance_path
from cloudseed.web.microversions import APIVersion, requested_version, response_headers
from cloudseed.web.validation import NUL

access_log = logging.getLogger("cloudseed.access")


def is_versioned(path: str) -> bool:
    return path == "/v2.1" or path.startswith("/v2.1/")


class ComputeEdge:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_at = time.perf_counter()
        request_id = f"req-{uuid.uuid4()}"
        scope[REQUEST_ID_KEY] = request_id
        status = 500
        response_started = False
        version: APIVersion | None = None
        extra = [
            (b"x-openstack-request-id", request_id.encode()),
            (b"x-compute-request-id", request_id.encode()),
        ]

        async def send_with_headers(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        try:
            if _has_nul(scope):
                raise ValidationFailed(
                    "Invalid input: the path or the query contains a NUL character."
                )
            if is_versioned(scope["path"]):
                version = requested_version(_headers(scope))
                scope[VERSION_KEY] = version
                extra.extend(_version_headers(version))
            await self.app(scope, receive, send_with_headers)
        except Exception as exc:
            if response_started:
                # The inner error handler already answered and logged; nothing more to say.
                pass
            else:
                code, headers, body = fault_parts(exc, glance=is_glance_path(scope["path"]))
                await send_with_headers(
                    {
                        "type": "http.response.start",
                        "status": code,
                        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
                    }
                )
                await send({"type": "http.response.body", "body": body})
        finally:
            context = scope.get(CONTEXT_KEY)
            access_log.info(
                "%s %s %s %d %.1fms user=%s version=%s",
                request_id,
                scope["method"],
                _path_with_query(scope),
                status,
                (time.perf_counter() - started_at) * 1000,
                context.user_id if context else "-",
                version or "-",
            )


@functools.lru_cache(maxsize=256)  # one entry per microversion served: a bounded set
def _version_headers(version: APIVersion) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((k.lower().encode(), v.encode()) for k, v in response_headers(version))


def _has_nul(scope: Scope) -> bool:
    query: bytes = scope.get("query_string", b"")
    return NUL in scope["path"] or b"%00" in query or b"\x00" in query


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _path_with_query(scope: Scope) -> str:
    path: str = scope["path"]
    query: bytes = scope.get("query_string", b"")
    return path + ("?" + query.decode("latin-1") if query else "")
