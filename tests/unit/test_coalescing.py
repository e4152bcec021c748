"""CoalescingTransport over a real socket: a response head goes out with the body that follows
it, in one write to the socket's transport; nothing is held past the loop's turn."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from cloudseed.transport import CoalescingTransport

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"


class Recording:
    """The real transport, with the writes that reached it counted."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.transport.write(data)

    def __getattr__(self, name: str) -> object:
        return getattr(self.transport, name)


def run(body: Callable[[CoalescingTransport, Recording, socket.socket], Awaitable[None]]) -> None:
    async def main() -> None:
        ours, theirs = socket.socketpair()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        recording = Recording(transport)
        try:
            await body(
                CoalescingTransport(recording, loop),  # type: ignore[arg-type]
                recording,
                theirs,
            )
        finally:
            transport.close()
            theirs.close()

    asyncio.run(main())


def received(peer: socket.socket, size: int) -> bytes:
    peer.settimeout(2)
    data = b""
    while len(data) < size:
        data += peer.recv(65536)
    return data


def test_head_and_body_go_out_in_one_write() -> None:
    async def body(wrapped: CoalescingTransport, rec: Recording, peer: socket.socket) -> None:
        wrapped.write(HEAD)
        assert rec.writes == []
        wrapped.write(b"hello")
        assert rec.writes == [HEAD + b"hello"]
        await asyncio.sleep(0)  # the end-of-turn flush finds nothing left
        assert rec.writes == [HEAD + b"hello"]
        assert received(peer, len(HEAD) + 5) == HEAD + b"hello"

    run(body)


def test_a_lone_head_is_sent_at_the_end_of_the_turn() -> None:
    async def body(wrapped: CoalescingTransport, rec: Recording, peer: socket.socket) -> None:
        wrapped.write(HEAD)
        await asyncio.sleep(0)
        assert rec.writes == [HEAD]
        assert received(peer, len(HEAD)) == HEAD

    run(body)


def test_other_writes_are_not_delayed_and_close_sends_a_held_head() -> None:
    async def body(wrapped: CoalescingTransport, rec: Recording, peer: socket.socket) -> None:
        wrapped.write(b"chunk")
        assert rec.writes == [b"chunk"]
        wrapped.write(HEAD)
        wrapped.close()
        assert rec.writes == [b"chunk", HEAD]
        # Read in a thread: the loop goes on running, should the transport still hold bytes.
        assert await asyncio.to_thread(received, peer, 5 + len(HEAD)) == b"chunk" + HEAD

    run(body)


# -- the protocol's keep-alive timer ------------------------------------------------------------


def serve_briefly(body: Callable[[int], Awaitable[None]], keep_alive: float) -> None:
    """A uvicorn server with CoalescingHttpToolsProtocol and a short keep-alive timeout
    around ``body(port)``."""
    import uvicorn

    from cloudseed.coalescing import CoalescingHttpToolsProtocol

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})

    async def main() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            app,
            http=CoalescingHttpToolsProtocol,
            lifespan="off",
            log_config=None,
            timeout_keep_alive=keep_alive,  # type: ignore[arg-type]
        )
        server = uvicorn.Server(config)
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            await body(sock.getsockname()[1])
        finally:
            server.should_exit = True
            await task

    asyncio.run(main())


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    return head + await reader.readexactly(2)


def test_a_busy_connection_stays_open_and_an_idle_one_is_closed_after_the_timeout() -> None:
    async def body(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(8):  # 0.8 s of requests 0.1 s apart: never 0.3 s idle
            assert (await ask(reader, writer)).endswith(b"ok")
            await asyncio.sleep(0.1)  # paces the client under test, waits for nothing
        started = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 3) == b""  # closed by the server
        assert 0.15 < time.monotonic() - started < 1.5
        writer.close()

    serve_briefly(body, keep_alive=0.3)
