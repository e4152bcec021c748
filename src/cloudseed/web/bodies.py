"""A request body read straight from ASGI ``receive`` (the metadata service's POSTs), bounded,
and whole or not at all.

uvicorn answers ``receive`` with ``http.disconnect`` once the client has gone (or the
listener's deadline closed the connection, coalescing.py), and that message has no body and
no ``more_body``: a loop that stops at the first message without ``more_body`` takes the part
received so far for the whole body, and kept a password cut short. Here a disconnect is
``IncompleteBody``, raised before anything is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from cloudseed.types import Receive
from cloudseed.web.errors import IncompleteBody


async def whole_body(receive: Receive, *, limit: int, too_large: Callable[[], Exception]) -> bytes:
    """The body, once its last part has come; ``too_large()`` is raised as soon as more than
    ``limit`` bytes have (the rest is left unread), ``IncompleteBody`` if the client goes."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise IncompleteBody()
        part: bytes = message.get("body", b"")
        body += part
        if len(body) > limit:
            raise too_large()
        if not message.get("more_body"):
            return body
