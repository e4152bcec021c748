"""Two small HTTP servers for tests that put a real guest-side client in front of the metadata
service: a metadata proxy that names one instance, and a DynamicJSON vendordata target.

``metadata_relay(upstream, instance_id=..., tenant_id=..., secret=...)`` is what Neutron's
metadata proxy (and later the qemu driver's) does for a guest: it takes the guest's plain
HTTP requests on a loopback port of its own, adds ``X-Instance-ID``, ``X-Tenant-ID`` and
``X-Instance-ID-Signature`` (hex HMAC-SHA256 of the instance id with the shared secret), and
forwards them to a metadata service running with ``[neutron] service_metadata_proxy``. Any
such headers the guest sent are dropped first, so the guest cannot name another instance.
Clients that cannot choose their source address (cloud-init's readers) are thereby one
instance. Each request is forwarded on a fresh upstream connection and answered with
``Connection: close``; the relay records what it saw (``Relay.exchanges``).

``vendordata_target(answer)`` answers every POST with ``answer`` as JSON and records the
bodies it was sent.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from cloudseed.signing import sign

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
# Headers only the proxy may set: whatever the guest sent under these names is dropped.
IDENTITY = frozenset(
    {
        b"x-instance-id",
        b"x-tenant-id",
        b"x-instance-id-signature",
        b"x-forwarded-for",
        b"forwarded",
        b"x-metadata-provider",
        b"x-metadata-provider-signature",
    }
)
# The response is piped through byte for byte, so only its connection management changes.
RESPONSE_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection"})
MAX_HEAD = 64 * 1024
TIMEOUT = 30  # seconds for any one read from either side


@dataclass(frozen=True)
class Exchange:
    """One request as the guest sent it, and the status the metadata service answered."""

    method: str
    path: str
    headers: dict[str, str]  # the guest's, names lower-cased
    status: int


@dataclass
class Relay:
    url: str
    exchanges: list[Exchange] = field(default_factory=list)


class _BadRequest(Exception):
    pass


def _split_head(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    first, *lines = head.removesuffix(b"\r\n\r\n").split(b"\r\n")
    headers = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            raise _BadRequest(f"malformed header line {line!r}")
        headers.append((name.strip().lower(), value.strip()))
    return first, headers


def _render_head(first: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    return b"\r\n".join([first, *(name + b": " + value for name, value in headers)]) + (b"\r\n\r\n")


class _Forwarder:
    def __init__(
        self, upstream: str, identity: list[tuple[bytes, bytes]], record: Callable[[Exchange], None]
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.host, self.port = parts.hostname, parts.port
        self.identity = identity
        self.record = record

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(TIMEOUT):
                await self._one_request(reader, writer)
        except (_BadRequest, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.write(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with suppress(ConnectionError):
                await writer.wait_closed()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        first, headers = _split_head(await reader.readuntil(b"\r\n\r\n"))
        try:
            method, target, _version = first.split(b" ")
        except ValueError:
            raise _BadRequest(f"malformed request line {first!r}") from None
        found = dict(headers)
        if b"transfer-encoding" in found:
            raise _BadRequest("chunked request bodies are not relayed")
        body = await reader.readexactly(int(found.get(b"content-length", b"0")))
        forwarded = [
            (name, value)
            for name, value in headers
            if name not in HOP_BY_HOP and name not in IDENTITY and name != b"content-length"
        ]
        forwarded += self.identity
        forwarded += [(b"content-length", str(len(body)).encode()), (b"connection", b"close")]
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        try:
            up_writer.write(_render_head(first.replace(b"HTTP/1.0", b"HTTP/1.1"), forwarded) + body)
            await up_writer.drain()
            status_line, answer = _split_head(await up_reader.readuntil(b"\r\n\r\n"))
            status = int(status_line.split(b" ")[1])
            self.record(
                Exchange(
                    method.decode(),
                    target.decode(),
                    {k.decode(): v.decode("latin-1") for k, v in headers},
                    status,
                )
            )
            answer = [(name, value) for name, value in answer if name not in RESPONSE_HOP_BY_HOP]
            writer.write(_render_head(status_line, [*answer, (b"connection", b"close")]))
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            up_writer.close()
            with suppress(ConnectionError):
                await up_writer.wait_closed()


@contextmanager
def _serving(
    start: Callable[[asyncio.Event, Callable[[int], None]], Coroutine[Any, Any, None]],
) -> Iterator[int]:
    """Run ``start(stop, ready)`` in an event loop in a thread of its own until the test is
    done; ``start`` calls ``ready(port)`` once it listens. Yields the port."""
    ready = threading.Event()
    started: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Event]] = []
    failure: list[BaseException] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def listening(port: int) -> None:
            started.append((port, loop, stop))
            ready.set()

        await start(stop, listening)

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the test thread
            failure.append(exc)
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="metadata-relay", daemon=True)
    thread.start()
    ready.wait(30)
    if not started:
        raise RuntimeError("relay did not start") from (failure[0] if failure else None)
    port, loop, stop = started[0]
    try:
        yield port
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        if failure:
            raise RuntimeError("relay failed") from failure[0]


@contextmanager
def metadata_relay(
    upstream: str,
    *,
    instance_id: str,
    tenant_id: str,
    secret: str,
    forwarded_for: str | None = None,
    sock: socket.socket | None = None,
) -> Iterator[Relay]:
    """A metadata proxy for one instance in front of ``upstream`` (a metadata service in proxy
    mode); ``forwarded_for`` adds the X-Forwarded-For that Neutron's proxy also sends.
    ``sock``: a listening socket to take the guest's connections on (one made inside a
    network namespace, at 169.254.169.254:80) instead of a new one on a loopback port."""
    identity = [
        (b"x-instance-id", instance_id.encode()),
        (b"x-tenant-id", tenant_id.encode()),
        (b"x-instance-id-signature", sign(secret, instance_id).encode()),
    ]
    if forwarded_for is not None:
        identity.append((b"x-forwarded-for", forwarded_for.encode()))
    exchanges: list[Exchange] = []
    forwarder = _Forwarder(upstream, identity, exchanges.append)

    async def start(stop: asyncio.Event, ready: Callable[[int], None]) -> None:
        connections: set[asyncio.Task[None]] = set()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await forwarder.handle(reader, writer)
            finally:
                connections.discard(task)

        if sock is None:
            server = await asyncio.start_server(accept, "127.0.0.1", 0, limit=MAX_HEAD)
        else:
            server = await asyncio.start_server(accept, sock=sock, limit=MAX_HEAD)
        ready(server.sockets[0].getsockname()[1])
        async with server:
            await stop.wait()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    host = "127.0.0.1" if sock is None else sock.getsockname()[0]
    with _serving(start) as port:
        yield Relay(f"http://{host}:{port}", exchanges)


@dataclass
class Target:
    url: str
    bodies: list[Any] = field(default_factory=list)


@contextmanager
def vendordata_target(answer: Any) -> Iterator[Target]:
    """A DynamicJSON target that answers every POST with ``answer`` (as JSON)."""
    payload = json.dumps(answer).encode()
    bodies: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            bodies.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the test output stays readable

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="vendordata-target", daemon=True)
    thread.start()
    try:
        yield Target(f"http://127.0.0.1:{server.server_address[1]}/", bodies)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
