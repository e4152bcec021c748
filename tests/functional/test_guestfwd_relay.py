"""The guest's metadata proxy, run as QEMU runs it: a process per connection with the guest's
socket on standard input and output, forwarding to a real HTTP server over loopback. The headers
that arrive are checked with the metadata service's own proxy-mode identifier."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cloudseed.compute import guestfwd_relay
from cloudseed.metadata.errors import BadSignature
from cloudseed.metadata.identify import ByInstance, Identifier
from cloudseed.settings import load_settings
from cloudseed.signing import sign
from tests.support.ports import free_port

SECRET = "s3cret"
UUID = "0b8f3f49-5c0e-4d0a-8f39-4f8c1d2a9e11"


class Upstream:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, list[tuple[str, str]], bytes]] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                upstream.requests.append(
                    (self.command, self.path, list(self.headers.items()), body)
                )
                payload = b"answer to " + self.path.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]


@pytest.fixture()
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    thread = threading.Thread(target=up.server.serve_forever, daemon=True)
    thread.start()
    yield up
    up.server.shutdown()
    up.server.server_close()
    thread.join(10)


@pytest.fixture()
def config(tmp_path: Path, upstream: Upstream) -> Path:
    path = tmp_path / "relay.json"
    path.write_text(
        json.dumps(
            {
                "upstream": ["127.0.0.1", upstream.port],
                "headers": [
                    ["X-Instance-ID", UUID],
                    ["X-Tenant-ID", "proj"],
                    ["X-Instance-ID-Signature", sign(SECRET, UUID)],
                ],
            }
        )
    )
    return path


def exchange(config: Path, request: bytes) -> bytes:
    guest, relay_end = socket.socketpair()
    with guest, relay_end:
        process = subprocess.Popen(
            [sys.executable, "-I", guestfwd_relay.__file__, str(config)],
            stdin=relay_end.fileno(),
            stdout=relay_end.fileno(),
        )
        relay_end.close()
        guest.sendall(request)
        answer = b""
        guest.settimeout(20)
        while chunk := guest.recv(65536):
            answer += chunk
        assert process.wait(20) == 0
    return answer


def identifier() -> Identifier:
    return Identifier(
        load_settings(
            environ={
                "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
                "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": SECRET,
            }
        )
    )


def as_bytes(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in headers]


def test_signed_identity_reaches_the_service(config: Path, upstream: Upstream) -> None:
    answer = exchange(
        config,
        b"GET /openstack/latest/meta_data.json HTTP/1.1\r\n"
        b"Host: 169.254.169.254\r\nAccept: */*\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b"answer to /openstack/latest/meta_data.json")
    method, path, headers, _ = upstream.requests[0]
    assert (method, path) == ("GET", "/openstack/latest/meta_data.json")
    claim = identifier().claim("127.0.0.1", as_bytes(headers))
    assert claim == ByInstance(UUID, "proj", None)
    assert ("Host", "169.254.169.254") in headers and ("Connection", "close") in headers


def test_identity_the_guest_sent_is_replaced(config: Path, upstream: Upstream) -> None:
    other = "11111111-2222-3333-4444-555555555555"
    exchange(
        config,
        b"GET / HTTP/1.1\r\nX-Instance-ID: "
        + other.encode()
        + b"\r\nx-instance-id-signature: "
        + sign(SECRET, other).encode()
        + b"\r\nX-Tenant-ID: evil\r\nX-Forwarded-For: 10.0.0.9\r\n"
        b"Forwarded: for=10.0.0.9\r\nX-Metadata-Provider: net\r\n\r\n",
    )
    _, _, headers, _ = upstream.requests[0]
    names = [k.lower() for k, _ in headers]
    for name in ("x-instance-id", "x-tenant-id", "x-instance-id-signature"):
        assert names.count(name) == 1
    for name in ("x-forwarded-for", "forwarded", "x-metadata-provider"):
        assert name not in names
    assert identifier().claim("127.0.0.1", as_bytes(headers)) == ByInstance(UUID, "proj", None)


def test_wrong_secret_is_refused_by_the_service(tmp_path: Path, upstream: Upstream) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "upstream": ["127.0.0.1", upstream.port],
                "headers": [
                    ["X-Instance-ID", UUID],
                    ["X-Tenant-ID", "proj"],
                    ["X-Instance-ID-Signature", sign("other", UUID)],
                ],
            }
        )
    )
    exchange(path, b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(BadSignature):
        identifier().claim("127.0.0.1", as_bytes(upstream.requests[0][2]))


def test_a_posted_password_is_relayed(config: Path, upstream: Upstream) -> None:
    answer = exchange(
        config,
        b"POST /openstack/2013-04-04/password HTTP/1.1\r\n"
        b"Content-Length: 5\r\nContent-Type: text/plain\r\n\r\nsecrt",
    )
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert upstream.requests[0][0] == "POST" and upstream.requests[0][3] == b"secrt"


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-Instance-ID : spoof\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"NONSENSE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x",  # the guest hangs up half-way
    ],
)
def test_malformed_requests_never_reach_the_service(
    config: Path, upstream: Upstream, request_bytes: bytes
) -> None:
    guest, relay_end = socket.socketpair()
    with guest, relay_end:
        process = subprocess.Popen(
            [sys.executable, "-I", guestfwd_relay.__file__, str(config)],
            stdin=relay_end.fileno(),
            stdout=relay_end.fileno(),
        )
        relay_end.close()
        guest.sendall(request_bytes)
        guest.shutdown(socket.SHUT_WR)
        guest.settimeout(20)
        answer = guest.recv(65536)
        assert process.wait(20) == 0
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert upstream.requests == []


def test_service_down_is_a_bad_gateway(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    path = tmp_path / "down.json"
    path.write_text(json.dumps({"upstream": ["127.0.0.1", port], "headers": []}))
    assert exchange(path, b"GET / HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 502 ")
