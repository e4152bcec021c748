"""What ``coalescing.py`` takes from uvicorn's internals, as one list checked against the
installed uvicorn (at import, and by tests/unit/test_coalescing_internals.py).

None of it is uvicorn's public API, so pyproject.toml pins uvicorn to the releases this was
tested with, and importing ``coalescing`` checks the installed one against this list: a release
that renames or drops one stops cloudseed at start with the piece named, never with an
AttributeError in the middle of a request.
"""

from __future__ import annotations

import dis
import inspect
from types import ModuleType
from typing import NamedTuple

import httptools
import uvicorn
from uvicorn.protocols.http import httptools_impl
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.server import ServerState


class Internal(NamedTuple):
    """One piece of uvicorn (or httptools) this module relies on. ``kind``: "method" (a
    function of ``owner`` taking ``arity`` positional arguments, self included), "attribute"
    (assigned to ``self`` by one of ``owner``'s methods) or "constant" (of module ``owner``).
    ``called_from``: for a method overridden here, the one of uvicorn's that must still call
    it, or the override would silently do nothing."""

    owner: type | ModuleType
    name: str
    kind: str
    arity: int = 0
    called_from: str = ""


_PROTOCOL = httptools_impl.HttpToolsProtocol
# fmt: off
UVICORN_INTERNALS: tuple[Internal, ...] = (
    Internal(httptools_impl, "STATUS_LINE", "constant"),
    # uvicorn's methods called through super() or by name, with their arity
    *(Internal(_PROTOCOL, name, "method", arity) for name, arity in (
        ("connection_made", 2), ("connection_lost", 2), ("data_received", 2),
        ("on_message_begin", 1), ("on_headers_complete", 1), ("on_body", 2),
        ("on_message_complete", 1), ("_start_asgi_task", 3), ("timeout_keep_alive_handler", 1),
    )),
    # uvicorn's methods replaced here, which its own code must go on calling
    Internal(_PROTOCOL, "on_response_complete", "method", 1, "on_headers_complete"),
    Internal(_PROTOCOL, "_unset_keepalive_if_required", "method", 1, "data_received"),
    Internal(_PROTOCOL, "_unsupported_upgrade_warning", "method", 1, "data_received"),
    # the protocol's state, the request cycle's and the server's, read and written here
    *(Internal(_PROTOCOL, name, "attribute") for name in (
        "app", "client", "cycle", "expect_100_continue", "flow", "headers", "loop", "parser",
        "pipeline", "scope", "server_state", "timeout_keep_alive", "transport", "url",
    )),
    # the request cycle's: whether its answer began or ended; a timed-out request's cycle
    # told its client is gone, as uvicorn's connection_lost tells it
    *(Internal(httptools_impl.RequestResponseCycle, name, "attribute") for name in (
        "response_complete", "response_started", "disconnected", "message_event",
    )),
    # set while the transport's buffer is over its high-water mark (answers not taken)
    Internal(FlowControl, "write_paused", "attribute"),
    Internal(ServerState, "default_headers", "attribute"),
    Internal(ServerState, "total_requests", "attribute"),
    # httptools' parser (public, but asked here rather than through uvicorn)
    *(Internal(httptools.HttpRequestParser, name, "method") for name in (
        "should_keep_alive", "should_upgrade", "get_http_version", "get_method"
    )),
)
# fmt: on


def _assigned_to_self(owner: type) -> set[str]:
    """The attribute names ``owner``'s own methods assign (``self.x = ...``)."""
    names: set[str] = set()
    for value in vars(owner).values():
        code = getattr(value, "__code__", None)
        if code is not None:
            names.update(i.argval for i in dis.get_instructions(code) if i.opname == "STORE_ATTR")
    return names


def uvicorn_mismatches() -> list[str]:
    """Each piece of ``UVICORN_INTERNALS`` the installed uvicorn lacks, or has in another
    shape, described; empty when all is as this module expects."""
    found: list[str] = []
    assigned: dict[type, set[str]] = {}
    for internal in UVICORN_INTERNALS:
        owner, name = internal.owner, internal.name
        where = f"{owner.__name__}.{name}"
        if internal.kind == "constant":
            table = getattr(owner, name, None)
            line = table.get(200) if isinstance(table, dict) else None
            if not isinstance(line, bytes) or not line.startswith(b"HTTP/1.1 200 "):
                found.append(f"{where}: no longer a table of status lines by status code")
        elif internal.kind == "attribute":
            assert isinstance(owner, type)
            if owner not in assigned:
                assigned[owner] = _assigned_to_self(owner)
            if name not in assigned[owner]:
                found.append(f"{where}: no method of {owner.__name__} sets it any more")
        else:
            method = getattr(owner, name, None)
            # Defined by uvicorn (or httptools), not only by asyncio.Protocol or object.
            mine = owner.__module__.partition(".")[0]
            if not callable(method) or not any(
                name in vars(c) and c.__module__.startswith(mine) for c in owner.__mro__
            ):
                found.append(f"{where}: no such method")
                continue
            arity = len(inspect.signature(method).parameters) if internal.arity else 0
            if arity != internal.arity:
                found.append(f"{where}: takes {arity} arguments, not {internal.arity}")
            caller = getattr(getattr(owner, internal.called_from or name, None), "__code__", None)
            if internal.called_from and (caller is None or name not in caller.co_names):
                found.append(f"{where}: {owner.__name__}.{internal.called_from} no longer calls it")
    return found


class UvicornMismatch(RuntimeError):
    """The installed uvicorn is not one coalescing.py was written against."""


def require_tested_uvicorn() -> None:
    """Raise ``UvicornMismatch`` naming every piece the installed uvicorn changed."""
    mismatches = uvicorn_mismatches()
    if mismatches:
        raise UvicornMismatch(
            f"uvicorn {uvicorn.__version__} is not a release cloudseed.coalescing was written "
            "against (pyproject.toml pins the tested ones); what changed: " + "; ".join(mismatches)
        )
