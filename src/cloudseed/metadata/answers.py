"""What the metadata app sends: a status, bytes and a few headers (no framework types)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from cloudseed.at_once import AtOnce
from cloudseed.replay import MakeReplayable, Replayable

TEXT = b"text/plain; charset=utf-8"
JSON = b"application/json"
JWT = b"application/jwt"
BINARY = b"application/octet-stream"


class Answer(NamedTuple):
    """Immutable; a named tuple rather than a frozen dataclass, since two or three are made
    for every request of a boot storm and a frozen dataclass costs three times as much to
    make."""

    status: int
    body: bytes
    content_type: bytes = TEXT
    headers: tuple[tuple[bytes, bytes], ...] = ()
    sent: Callable[[], None] | None = None  # called once the body is handed to the connection

    @property
    def etag(self) -> bytes:
        for name, value in self.headers:
            if name == b"etag":
                return value
        return b""


def at_once(answer: Answer, method: str, replayable: MakeReplayable | None = None) -> AtOnce:
    """``answer`` as the ASGI path would send it (asgi.py ``send_answer``): the same headers
    in the same order (content type and length, then the answer's own; a 304 only its own);
    HEAD: no body, and no call for what the body delivers. ``replayable``: the app's word
    that it may be replayed (replay.py), not where the answer delivers something; its hole
    only in a whole answer (a 200 to a GET)."""
    lines = []
    if answer.status != 304:
        lines.append(
            b"content-type: %s\r\ncontent-length: %d\r\n" % (answer.content_type, len(answer.body))
        )
    lines += [b"%s: %s\r\n" % (name, value) for name, value in answer.headers]
    if replayable is not None and answer.sent is not None:
        replayable = None  # a first delivery is recorded: never replayed
    whole = method == "GET" and answer.status == 200
    if replayable is not None and not whole:
        replayable = _without_hole(replayable)
    if method == "HEAD":
        return AtOnce(answer.status, b"".join(lines), b"", None, replayable)
    return AtOnce(answer.status, b"".join(lines), answer.body, answer.sent, replayable)


def _without_hole(make: MakeReplayable) -> MakeReplayable:
    """``make``, its Replayable without a hole (an answer that is not whole has none)."""

    def made() -> Replayable | None:
        replayable = make()
        if replayable is None or replayable.hole is None:
            return replayable
        return replayable._replace(hole=None)

    return made
