"""The hop limit of a session token's answer (2.109), so a guest's token travels no further
than its server allows.

The connection that carries a guest's token leaves with that server's own hop limit.

The app's ``__call__`` notes the socket of each PUT (the protocol's scope extension) in a
context variable, per request task; the token's answer then sets the limit on it.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from cloudseed.at_once import SOCKET_EXTENSION
from cloudseed.listening import set_hop_limit
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.types import Scope

log = logging.getLogger(__name__)

_REQUEST_SOCKET: ContextVar[Any] = ContextVar("metadata_request_socket", default=None)


def note_socket(scope: Scope) -> None:
    """Remember the socket of the request ``scope`` for ``limit_hops`` (None without one)."""
    _REQUEST_SOCKET.set((scope.get("extensions") or {}).get(SOCKET_EXTENSION))


def limit_hops(guest: GuestDocuments) -> None:
    """Give the connection that carries ``guest``'s session token the server's own hop
    limit, when it has one: the answer, and anything later on that connection, leaves with it
    (never raised again: a retransmission of the token must not go further). Without one,
    the listener's (``[metadata] hop_limit``) stays."""
    hops = guest.facts.hop_limit
    sock = _REQUEST_SOCKET.get()
    if hops is None or sock is None:
        return
    try:
        set_hop_limit(sock, hops)
    except OSError:
        log.exception("setting hop limit %d on a token answer failed", hops)
