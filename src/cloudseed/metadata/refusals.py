"""How the metadata service says no: a plain-text answer, as Nova's metadata API, with the
status from the one error table (``web/faults.py``) and the headers that status calls for.

Every refusal but a wrong method is written to the access log with its reason, whether or not
``[metadata] access_log`` asks for every request to be.
"""

from __future__ import annotations

import logging

from cloudseed.errors import CloudseedError
from cloudseed.metadata.answers import Answer
from cloudseed.web.errors import MethodNotAllowed, RequestTooLarge
from cloudseed.web.faults import status_for

access_log = logging.getLogger("cloudseed.metadata.access")

REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def refusal(exc: CloudseedError, method: str, path: str, peer: str | None) -> Answer:
    """The answer to a request ``exc`` refused."""
    status = status_for(exc)
    headers: tuple[tuple[bytes, bytes], ...] = ()
    if isinstance(exc, MethodNotAllowed):
        headers = ((b"allow", (exc.allow or "").encode()),)
    else:
        why = getattr(exc, "why", exc.message)
        access_log.warning('%s "%s %s" %d %s', peer, method, path, status, why)
    if status == 401:
        headers = ((b"www-authenticate", b"Token"),)
    if isinstance(exc, RequestTooLarge):  # the rest of the body was never read
        headers = ((b"connection", b"close"),)
    body = f"{status} {REASONS.get(status, '')}\n\n{exc.message}".encode()
    return Answer(status, body, headers=headers)
