"""uvicorn's httptools protocol with two changes: request heads have size limits, and one
``send()`` per HTTP response instead of two.

Head limits: httptools buffers a header until its line ends and uvicorn sets no bound, so one
100 MB header line was held in memory whole (four at once took a worker from 84 to 316 MB).
``HeadLimits`` bounds the request line (414), each header line and the whole head (431),
counted on the bytes as they arrive, before the parser sees them; the answer is sent and the
connection closed at once, so at most one limit's worth of a head is ever held.

uvicorn writes a response's head and its body to the transport separately, and an asyncio
socket transport with nothing buffered sends each write at once: two system calls per
response, a third of a metadata worker's time in a boot storm (py-spy, docs/benchmarks.md).
Here a write that ends a response head is held back and sent together with the write that
follows it (the body, in the same step of the same task), or at the end of the event loop's
turn if nothing follows. Everything else is written at once: holding every write to the end
of the turn (tried first) sent one response per turn of a busy loop late, which raised the
p99 latency while it raised throughput.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


@dataclass(frozen=True)
class HeadLimits:
    """Sizes in bytes, line endings included (``[wsgi]`` in settings.py)."""

    max_request_line: int = 8192
    max_header_line: int = 16384
    max_header_size: int = 65536


class CoalescingTransport:
    """Wraps a transport: a response head waits for the next write (or the end of the loop's
    turn); ``close`` sends it first, as a transport's own close sends what it buffered;
    everything else is the wrapped transport's."""

    __slots__ = ("_head", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        if self._head is not None:
            data, self._head = self._head + data, None
        elif data.endswith(b"\r\n\r\n"):
            self._head = data
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        if self._head is not None:
            data, self._head = self._head, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


_REASONS = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through a CoalescingTransport, with the head
    limits of the class attribute ``limits`` (``with_limits`` makes a subclass per listener)."""

    limits = HeadLimits()

    # Where the head scan stands: inside a head, the current line's length so far, the line
    # number (0: the request line), the head's size so far.
    _in_head = True
    _line = 0
    _line_no = 0
    _head = 0

    @classmethod
    def with_limits(cls, limits: HeadLimits) -> type[CoalescingHttpToolsProtocol]:
        return type(cls.__name__, (cls,), {"limits": limits})

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            status = self._scan_head(data)
            if status is not None:
                self._refuse(status)
                return
        super().data_received(data)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._line, self._line_no, self._head = True, 0, 0, 0

    def _scan_head(self, data: bytes) -> int | None:
        """Count ``data`` into the head; the status to refuse with once a limit is passed.
        The head ends at its first empty line; what follows is the body, not counted."""
        limits = self.limits
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._line += len(data) - start
                self._head += len(data) - start
            else:
                self._line += end + 1 - start
                self._head += end + 1 - start
            if self._line_no == 0 and self._line > limits.max_request_line:
                return 414
            if self._line_no > 0 and self._line > limits.max_header_line:
                return 431
            if self._head > limits.max_header_size:
                return 431
            if end < 0:
                return None
            if self._line <= 2 and self._line_no > 0:  # "\r\n" or "\n": the head is complete
                self._in_head = False
                return None
            if self._line > 2 or self._line_no > 0:
                self._line_no += 1  # empty lines before the request line are skipped
            self._line = 0
            start = end + 1

    def _refuse(self, status: int) -> None:
        self._in_head = False
        reason = _REASONS[status]
        body = reason + b"\n"
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()
