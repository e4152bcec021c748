"""One ``send()`` per HTTP response: the transport the listener's protocol (``coalescing.py``)
writes through.

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
from typing import Any


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

    def write_whole(self, data: bytes) -> None:
        """Write ``data``, a whole response, at once (after a head held back, if any)."""
        if self._head is not None:
            data, self._head = self._head + data, None
        self._transport.write(data)

    def is_closing(self) -> bool:  # asked once per response: not through __getattr__
        return self._transport.is_closing()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
