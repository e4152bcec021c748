"""A worker listens on ACCEPTING_SOCKETS sockets per port (``listening.listen_own``), because
uvloop's libuv accepts one connection per listening socket and loop iteration: with one socket,
a worker busy answering a storm let new connections wait in the kernel's queue for as many
iterations as there were connections before them (docs/benchmarks.md, issue 36). And the port
is reserved only where no other process listens on it (``listening.reserve``): SO_REUSEPORT
alone would let a second server of the same user join the first's sockets."""

from __future__ import annotations

import asyncio
import socket

import pytest

from cloudseed import serve
from cloudseed.db.engines import Database
from cloudseed.errors import ConfigError
from cloudseed.listening import ACCEPTING_SOCKETS, Listener, listen_own, reserve
from cloudseed.settings import Settings
from cloudseed.types import ASGIApp

pytest.importorskip("uvloop", reason="uvloop has no wheel for this platform")


def _no_app(settings: Settings, db: Database | None) -> ASGIApp:
    raise AssertionError("only the sockets are made here")


def _listener(port: int = 0) -> Listener:
    return Listener("metadata service", "127.0.0.1", port, _no_app)


def _iterations_to_accept(sockets: list[socket.socket], connections: int) -> int:
    """Event loop iterations a worker's loop takes to accept ``connections`` that were waiting
    in the kernel's queues when it started."""
    loop = serve.new_event_loop()
    accepted_at: list[int] = []
    transports: list[asyncio.BaseTransport] = []
    iteration = 0

    class Counting(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted_at.append(iteration)
            transports.append(transport)

    def tick() -> None:  # once per iteration: a call_soon made in one runs in the next
        nonlocal iteration
        iteration += 1
        if len(accepted_at) < connections and iteration < 10 * connections:
            loop.call_soon(tick)
        else:
            loop.stop()

    servers = [loop.run_until_complete(loop.create_server(Counting, sock=s)) for s in sockets]
    port = sockets[0].getsockname()[1]
    # The kernel completes each handshake into a queue while the loop is not running.
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    try:
        loop.call_soon(tick)
        loop.run_forever()
    finally:
        for transport in transports:
            transport.close()
        for client in clients:
            client.close()
        for server in servers:
            server.close()
            loop.run_until_complete(server.wait_closed())
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.close()
    assert len(accepted_at) == connections
    return max(accepted_at)


def test_a_worker_accepts_many_waiting_connections_per_iteration() -> None:
    reserved = reserve(_listener())
    own = listen_own([(_listener(), reserved)])
    assert len(own) == ACCEPTING_SOCKETS
    assert {sock.getsockname() for _, sock in own} == {own[0][1].getsockname()}
    try:
        connections = 10 * ACCEPTING_SOCKETS
        # The kernel hashes connections over the sockets, unevenly: a few more than ten in
        # the longest queue. One socket would take one iteration per connection.
        assert _iterations_to_accept([sock for _, sock in own], connections) <= connections / 4
    finally:
        for _, sock in own:
            sock.close()


def test_one_listening_socket_accepts_one_connection_per_iteration() -> None:
    """Why there are several: uvloop's own behaviour, which the test above relies on."""
    sock = socket.create_server(("127.0.0.1", 0), backlog=128)
    try:
        assert _iterations_to_accept([sock], 32) >= 31
    finally:
        sock.close()


def test_a_port_another_server_listens_on_is_not_joined() -> None:
    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    other.bind(("127.0.0.1", 0))
    other.listen()
    port = other.getsockname()[1]
    try:
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            reserve(_listener(port))
    finally:
        other.close()


def test_a_free_port_is_reserved_without_listening() -> None:
    reserved = reserve(_listener())
    try:
        assert reserved.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
        assert reserved.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0
        assert reserved.getsockname()[1] != 0
    finally:
        reserved.close()
