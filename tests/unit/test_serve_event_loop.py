"""A serve worker runs on uvloop's event loop (``serve.new_event_loop``), which accepts a
connection and makes its transport in C: guests behind Neutron's proxy open a connection for
every request. The functional tests' in-process servers take the same loop
(tests/support/server.py), so the HTTP protocol is tested on the transports it meets."""

from __future__ import annotations

import asyncio

import pytest

from cloudseed import serve

uvloop = pytest.importorskip("uvloop", reason="uvloop has no wheel for this platform")


def test_a_worker_loop_is_uvloops() -> None:
    loop = serve.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)

        async def echo_once() -> bytes:
            async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                writer.write(await reader.readexactly(4))
                await writer.drain()
                writer.close()

            server = await asyncio.start_server(answer, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"ping")
            got = await reader.readexactly(4)
            writer.close()
            server.close()
            await server.wait_closed()
            return got

        assert loop.run_until_complete(echo_once()) == b"ping"
    finally:
        loop.close()
