"""The one place where errors become HTTP: the status table, and Nova's fault body.

Nova's body is ``{"<faultName>": {"code": N, "message": "..."}}``; clients (openstacksdk,
tempest) read ``message`` from it, so every error path of the compute API goes through
``fault_parts``: the app's exception handlers, the edge (errors before routing), and the
keystone middleware's 401. The metadata service takes its statuses from ``status_for`` too
(its bodies are plain text, as Nova's metadata API).

The Glance slice (``/image/...``) answers errors in Glance's shape instead, webob's JSON error
body ``{"message": "...", "code": "404 Not Found", "title": "Not Found"}`` (without the
``<br /><br />`` webob appends to the message); openstacksdk reads ``message`` from both.
"""

from __future__ import annotations

import json
import logging

from cloudseed.errors import (
    CloudseedError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
    TooLarge,
    Unauthorized,
)
from cloudseed.web import errors as edge

log = logging.getLogger(__name__)

# Most specific first: the first class an error is an instance of decides.
STATUS_BY_ERROR: tuple[tuple[type[CloudseedError], int], ...] = (
    (edge.UnsupportedAPIVersion, 406),
    (edge.NotAuthenticated, 401),
    (edge.MethodNotAllowed, 405),
    (edge.RequestTooLarge, 413),
    (edge.UnsupportedMediaType, 415),
    (edge.RangeNotSatisfiable, 416),
    (InvalidInput, 400),
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (TooLarge, 413),
    (ServiceUnavailable, 503),
)

# Nova's names (nova/api/openstack/wsgi.py Fault); anything else is "computeFault".
FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}

# webob's titles, which Glance's bodies carry (Python's own phrases change between versions).
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    416: "Requested Range Not Satisfiable",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
GLANCE_PREFIX = "/image/"

INTERNAL_ERROR_MESSAGE = (
    "Unexpected API Error. Please report this at the cloudseed issue "
    "tracker and attach the cloudseed API log if possible."
)


def status_for(exc: BaseException) -> int:
    for cls, status in STATUS_BY_ERROR:
        if isinstance(exc, cls):
            return status
    return 500


def fault_body(status: int, message: str) -> bytes:
    name = FAULT_NAMES.get(status, "computeFault")
    return json.dumps({name: {"code": status, "message": message}}).encode()


def is_glance_path(path: str) -> bool:
    """Whether a request is the Glance slice's, whose errors are Glance's bodies."""
    return path.startswith(GLANCE_PREFIX)


def glance_fault_body(status: int, message: str) -> bytes:
    title = TITLES.get(status, "Error")
    return json.dumps({"message": message, "code": f"{status} {title}", "title": title}).encode()


def fault_parts(
    exc: BaseException, *, glance: bool = False
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body for an error (Glance's body with ``glance``); unexpected
    errors are logged, not shown."""
    status = status_for(exc)
    if isinstance(exc, CloudseedError) and status != 500:
        message = exc.message
    else:
        log.error("unexpected error in the compute API", exc_info=exc)
        message = INTERNAL_ERROR_MESSAGE
    headers = [("Content-Type", "application/json; charset=UTF-8")]
    if status == 401:
        headers.append(("WWW-Authenticate", "Keystone uri=''"))
    if isinstance(exc, edge.MethodNotAllowed) and exc.allow:
        headers.append(("Allow", exc.allow))
    if isinstance(exc, edge.RangeNotSatisfiable):
        headers.append(("Content-Range", f"bytes */{exc.size}"))
    if isinstance(exc, edge.RequestTooLarge):
        # The rest of the body was never read: on a kept-alive connection its bytes would be
        # parsed as the next request (a 414 for the client's next call). Closing ends them.
        headers.append(("Connection", "close"))
    body = glance_fault_body(status, message) if glance else fault_body(status, message)
    return status, headers, body
