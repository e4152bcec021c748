"""Raw HTTP/1.1 on one kept-alive connection: heads written byte for byte (the listener's
replays are keyed by those bytes, replay.py), answers read one at a time."""

from __future__ import annotations

import base64
import json
import socket
from types import TracebackType
from typing import Any

import pytest


def head(path: str, *lines: str) -> bytes:
    """A GET head for ``path`` with ``lines`` after the Host line."""
    return "".join(
        [f"GET {path} HTTP/1.1\r\nHost: md\r\n", *(f"{x}\r\n" for x in lines), "\r\n"]
    ).encode()


Answer = tuple[int, dict[str, str], bytes]  # status, headers (names lower-cased), body


class Connection:
    """One kept-alive connection to ``url`` from ``source``; closed when its block ends."""

    def __init__(self, url: str, source: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection(
            (host, int(port)), timeout=10, source_address=(source, 0)
        )
        self.buffer = b""

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.sock.close()

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def answer(self) -> Answer:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        top, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = top.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._more()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(status_line.split()[1]), headers, body

    def ask(self, raw: bytes) -> Answer:
        self.send(raw)
        return self.answer()

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, f"closed; read so far {self.buffer!r}"
        self.buffer += chunk


def without_date(answer: Answer) -> tuple[int, list[tuple[str, str]], bytes]:
    """``answer`` without its Date header (written fresh at every answer, replays included),
    which it must have."""
    status, headers, body = answer
    assert "date" in headers
    return status, sorted((k, v) for k, v in headers.items() if k != "date"), body


def alike_but_the_seed(bodies: list[bytes]) -> None:
    """``bodies`` are meta_data.json answers that differ in their random seed alone: each a
    new 512 bytes (base64), everything else the same."""
    documents = [json.loads(body) for body in bodies]
    seeds = [base64.b64decode(document.pop("random_seed"), validate=True) for document in documents]
    assert {len(seed) for seed in seeds} == {512}
    assert len(set(seeds)) == len(seeds), "a seed given twice"
    assert all(document == documents[0] for document in documents)


def asked_at_once(monkeypatch: pytest.MonkeyPatch, app_class: type[Any]) -> list[str]:
    """The paths every app of ``app_class`` is asked to answer at once from now on, in order
    (``respond_now``; a replayed answer does not ask it)."""
    calls: list[str] = []
    original = app_class.respond_now

    def counting(self: Any, method: str, path: str, *args: Any) -> Any:
        calls.append(path)
        return original(self, method, path, *args)

    monkeypatch.setattr(app_class, "respond_now", counting)
    return calls
