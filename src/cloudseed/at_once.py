"""Answers at once: what an app gives the listener's protocol (``coalescing.py``) to write
without an ASGI cycle.

An app with a ``respond_now(method, path, peer, headers)`` method
(``AnswersAtOnce``: the metadata app) is asked first, when the head of a plain GET or HEAD
is complete, for the whole answer (``AtOnce``); when it has one (a cached guest's document),
the protocol writes it at once, status line and head included, in one write: no ASGI scope,
no request cycle, no Task, no message dicts (uvicorn's scope and cycle are made only for a
request that takes its path). When it has none, the request takes uvicorn's ASGI path as any
other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

from cloudseed.replay import MakeReplayable

Headers = list[tuple[bytes, bytes]]  # as the ASGI scope has them: names lower-cased


class AtOnce(NamedTuple):
    """A whole answer for the protocol to write itself: the status, the header lines (each
    ending in CRLF, the blank line not included), the body, and what to call once it is
    written; and, when the app says the same request may be answered with the same bytes
    until the guest changes, how to make its ``Replayable`` should it be kept (``replay.py``)."""

    status: int
    header_lines: bytes
    body: bytes
    sent: Callable[[], None] | None
    replayable: MakeReplayable | None = None


@runtime_checkable
class AnswersAtOnce(Protocol):
    """An app that answers some requests at once (the metadata app; the metrics edge passes
    it on). The protocol asks the outermost app of its listener, once the head of a plain
    GET or HEAD is complete: ``respond_now(method, path, peer, headers)`` returns the whole
    answer, or None for the request to take the ASGI path."""

    def respond_now(
        self, method: str, path: str, peer: str | None, headers: Headers
    ) -> AtOnce | None: ...


# ``AnswersAtOnce.respond_now`` of an app, as the protocol keeps it.
RespondNow = Callable[[str, str, str | None, Headers], AtOnce | None]

# The ASGI scope extension the protocol adds to a PUT taking the ASGI path: its connection's
# socket, on which the metadata service sets a session token answer's hop limit (2.109).
SOCKET_EXTENSION = "cloudseed.socket"
