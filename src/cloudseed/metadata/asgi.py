"""The ASGI plumbing both metadata apps share (``metadata/app.py``, cloudseed's, and
``nova_metadata/app.py``, the Nova drop-in's): the lifespan loop, one request turned into an
Answer with refusals and failures answered in plain text, and the Answer written out."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from cloudseed.errors import CloudseedError
from cloudseed.metadata.answers import Answer
from cloudseed.metadata.refusals import access_log, refusal
from cloudseed.types import Receive, Scope, Send

log = logging.getLogger(__name__)

UNKNOWN_ERROR = b"An unknown error has occurred. Please try your request again."

# (method, path, peer, headers, receive, query) -> the answer
Answering = Callable[
    [str, str, str | None, list[tuple[bytes, bytes]], Receive, bytes], Awaitable[Answer]
]


async def lifespan(
    receive: Receive,
    send: Send,
    *,
    startup: Callable[[], Awaitable[None]],
    shutdown: Callable[[], Awaitable[None]],
    what: str,
) -> None:
    """Run ``startup`` and ``shutdown`` when the server says (a failed start is reported to
    it, which then does not serve)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await startup()
            except Exception as exc:
                log.exception("%s failed to start", what)
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def respond(
    scope: Scope, receive: Receive, send: Send, answering: Answering, *, log_every_request: bool
) -> None:
    """Answer one HTTP request: ``answering``'s answer, a refusal for a CloudseedError, a
    fixed 500 (logged) for anything else."""
    method, path = scope["method"], scope["path"]
    client = scope.get("client")
    peer = client[0] if client else None
    try:
        answer = await answering(
            method, path, peer, scope["headers"], receive, scope["query_string"]
        )
    except CloudseedError as exc:
        answer = refusal(exc, method, path, peer)
    except Exception:
        log.exception("metadata request %s %s from %s failed", method, path, peer)
        answer = Answer(500, UNKNOWN_ERROR)
    else:
        if log_every_request:
            access_log.info('%s "%s %s" %d %d', peer, method, path, answer.status, len(answer.body))
    await send_answer(send, answer, method)


async def send_answer(send: Send, answer: Answer, method: str) -> None:
    """``answer`` as the response: content type and length, then its own headers (a 304
    only its own); HEAD without the body; ``sent`` called once a GET's body is handed on."""
    headers = [
        (b"content-type", answer.content_type),
        (b"content-length", str(len(answer.body)).encode()),
        *answer.headers,
    ]
    if answer.status == 304:  # no body, and no headers that would describe one
        headers = list(answer.headers)
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else answer.body})
    if answer.sent is not None and method == "GET":
        answer.sent()
