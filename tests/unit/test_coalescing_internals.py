"""coalescing.py against the installed uvicorn: every private piece it uses is there in the
shape it expects (``UVICORN_INTERNALS``, the one list the module checks at import too), a
release that drops one stops the import naming it, and the uvicorn methods coalescing.py
reproduces are still the ones it was written from."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http import httptools_impl
from uvicorn.server import ServerState

from cloudseed.at_once import AnswersAtOnce
from cloudseed.coalescing import CoalescingHttpToolsProtocol
from cloudseed.metadata.app import MetadataApp
from cloudseed.uvicorn_internals import UVICORN_INTERNALS, uvicorn_mismatches

SRC = Path(__file__).resolve().parents[2] / "src"
PROTOCOL = httptools_impl.HttpToolsProtocol

# uvicorn's code that coalescing.py carries a changed copy of, by the digest of its source in
# the release pinned in pyproject.toml. A new release that changes one fails here: read the
# new code, carry the change into coalescing.py, then record the new digest.
REPRODUCED = {
    # CoalescingHttpToolsProtocol.on_response_complete: the same steps, one idle timer.
    (PROTOCOL, "on_response_complete"): "64e254f28e389e76",
    # on_message_begin, deferred to on_headers_complete: the scope only for the ASGI path.
    (PROTOCOL, "on_message_begin"): "96d377fdc7c2baef",
    # _answer_now's conditions mirror when on_headers_complete would start a cycle.
    (PROTOCOL, "on_headers_complete"): "1ea8589acfad92d8",
    # _write_at_once writes what send() writes for a response head and its body.
    (httptools_impl.RequestResponseCycle, "send"): "abdd8601b326a8da",
}


def test_the_installed_uvicorn_has_every_internal_coalescing_uses() -> None:
    assert uvicorn_mismatches() == [], f"uvicorn {uvicorn.__version__}"


def test_the_methods_coalescing_reproduces_are_unchanged() -> None:
    changed = [
        f"{owner.__name__}.{name}"
        for (owner, name), digest in REPRODUCED.items()
        if hashlib.sha256(inspect.getsource(getattr(owner, name)).encode()).hexdigest()[:16]
        != digest
    ]
    assert changed == [], (
        f"uvicorn {uvicorn.__version__} changed code coalescing.py reproduces: {changed}"
    )


def test_a_live_protocol_has_every_attribute_the_list_names() -> None:
    """Beyond the check at import (which reads uvicorn's bytecode): one real connection
    through CoalescingHttpToolsProtocol, with a request parsed and its cycle made."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> None:
        ours, theirs = socket.socketpair()
        config = uvicorn.Config(app, http=CoalescingHttpToolsProtocol, log_config=None)
        state = ServerState()
        protocol = CoalescingHttpToolsProtocol(config, state, {}, asyncio.get_running_loop())
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
            lambda: protocol, ours
        )
        try:
            protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            owners = {
                PROTOCOL: protocol,
                type(state): state,
                type(protocol.cycle): protocol.cycle,
                type(protocol.flow): protocol.flow,
            }
            missing = [
                f"{i.owner.__name__}.{i.name}"
                for i in UVICORN_INTERNALS
                if i.kind == "attribute" and not hasattr(owners[i.owner], i.name)
            ]
            assert missing == []
            for task in list(state.tasks):
                await task
        finally:
            transport.close()
            theirs.close()

    asyncio.run(main())


def test_every_method_the_list_names_is_checked_for_presence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # httptools' parser is a C type: its methods cannot be taken away to try.
    methods = [
        i
        for i in UVICORN_INTERNALS
        if i.kind == "method" and i.owner.__module__.startswith("uvicorn")
    ]
    assert len(methods) >= 10
    for internal in methods:
        with monkeypatch.context() as patched:
            patched.delattr(internal.owner, internal.name)
            assert f"{internal.owner.__name__}.{internal.name}: no such method" in (
                uvicorn_mismatches()
            )


def test_an_override_uvicorn_no_longer_calls_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def data_received(self: Any, data: bytes) -> None:
        # as if uvicorn had renamed _unset_keepalive_if_required and its upgrade warning
        self.parser.feed_data(data)

    monkeypatch.setattr(PROTOCOL, "data_received", data_received)
    assert uvicorn_mismatches() == [
        "HttpToolsProtocol._unset_keepalive_if_required: "
        "HttpToolsProtocol.data_received no longer calls it",
        "HttpToolsProtocol._unsupported_upgrade_warning: "
        "HttpToolsProtocol.data_received no longer calls it",
    ]


def test_an_import_against_a_changed_uvicorn_fails_naming_the_piece() -> None:
    """In a process of its own: an uvicorn without ``_start_asgi_task`` and with a cycle that
    no longer sets ``response_complete`` stops the import, naming both."""
    code = (
        "from uvicorn.protocols.http import httptools_impl as m\n"
        "del m.HttpToolsProtocol._start_asgi_task\n"
        "m.RequestResponseCycle = type('RequestResponseCycle', (), {})\n"
        "import cloudseed.coalescing\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(SRC)},
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("cloudseed.uvicorn_internals.UvicornMismatch: uvicorn ")
    assert "HttpToolsProtocol._start_asgi_task: no such method" in last
    assert "RequestResponseCycle.response_complete: no method of" in last


def test_the_metadata_app_declares_respond_now() -> None:
    assert AnswersAtOnce in MetadataApp.__mro__
    declared = inspect.signature(AnswersAtOnce.respond_now)
    assert inspect.signature(MetadataApp.respond_now).parameters.keys() == (
        declared.parameters.keys()
    )
