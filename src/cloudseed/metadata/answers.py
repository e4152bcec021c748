"""What the metadata app sends: a status, bytes and a few headers (no framework types)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

TEXT = b"text/plain; charset=utf-8"
JSON = b"application/json"
JWT = b"application/jwt"
BINARY = b"application/octet-stream"


@dataclass(frozen=True, slots=True)
class Answer:
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
