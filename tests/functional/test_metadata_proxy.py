"""A bridged network's metadata proxy on its own (compute/metadata_proxy.py), run as the driver
runs it: a process in the host's namespace with listening sockets made inside another
namespace, here one of the test's whose loopback holds the callers' addresses, forwarding to
a real HTTP server that echoes what arrived. Who the proxy takes a caller for is its port
map's business alone here (tests/functional/test_bridge_networks.py has the bridge in front):

- 127.0.0.2 and fd64::2 are guest A's, 127.0.0.4 guest B's; 127.0.0.3 is no port's.

Needs root and iproute2 (``NEEDS_NETNS``; CI runs as root).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cloudseed.compute import netns
from cloudseed.compute.bridge_plan import BridgedPort, proxy_ports
from cloudseed.compute.metadata_proxy import PER_CALLER
from tests.support.guest_netns import NEEDS_NETNS, namespace_prefix
from tests.support.waiting import wait_until

pytestmark = NEEDS_NETNS

A = BridgedPort(
    port_id="aaaaaaaa-0000-0000-0000-000000000000",
    mac="fa:16:3e:00:00:0a",
    addresses=("127.0.0.2", "fd64::2"),
    instance_id="inst-a",
    tenant_id="proj",
)
B = BridgedPort(
    port_id="bbbbbbbb-0000-0000-0000-000000000000",
    mac="fa:16:3e:00:00:0b",
    addresses=("127.0.0.4",),
    instance_id="inst-b",
    tenant_id="proj",
)
HEADERS = {
    A.port_id: [["X-Instance-ID", "inst-a"], ["X-Instance-ID-Signature", "sig-a"]],
    B.port_id: [["X-Instance-ID", "inst-b"], ["X-Instance-ID-Signature", "sig-b"]],
}


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        Echo.seen.append(dict(self.headers.items()))
        body = json.dumps(dict(self.headers.items())).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Running:
    namespace: str
    ports_file: Path

    def ask(self, source: str, raw: bytes | None = None, timeout: float = 5) -> bytes:
        request = (
            raw or b"GET /latest/meta-data/ HTTP/1.1\r\nHost: x\r\nX-Instance-ID: inst-b\r\n\r\n"
        )

        def exchange() -> bytes:
            family = socket.AF_INET6 if ":" in source else socket.AF_INET
            with socket.socket(family) as sock:
                sock.settimeout(timeout)
                sock.bind((source, 0))
                sock.connect(("::1" if ":" in source else "127.0.0.1", 80))
                sock.sendall(request)
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                return data

        return netns.inside(self.namespace, exchange)

    def hold(self, source: str) -> socket.socket:
        """A connection from ``source`` that sends nothing (the proxy waits for its head)."""

        def open_one() -> socket.socket:
            sock = socket.socket(socket.AF_INET)
            sock.bind((source, 0))
            sock.connect(("127.0.0.1", 80))
            return sock

        return netns.inside(self.namespace, open_one)


@pytest.fixture()
def proxy(tmp_path: Path) -> Iterator[Running]:
    Echo.seen = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    name = f"{namespace_prefix()}-proxy"
    process = None
    try:
        netns.create(name)  # in the try: a half-made namespace goes too
        for address in ("127.0.0.2/8", "127.0.0.3/8", "127.0.0.4/8", "fd64::2/128"):
            netns.ip(name, "address", "add", address, "dev", "lo")
        listeners = [
            netns.listening_socket(name, "127.0.0.1", 80),
            netns.listening_socket(name, "::1", 80),
        ]
        ports_file = tmp_path / "proxy-ports.json"
        ports_file.write_bytes(proxy_ports([A], HEADERS))
        fds = [s.fileno() for s in listeners]
        config = {
            "listen_fds": fds,
            "ports": str(ports_file),
            "upstream": ["127.0.0.1", upstream.server_address[1]],
        }
        (tmp_path / "proxy.json").write_text(json.dumps(config))
        with (tmp_path / "proxy.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "cloudseed.compute.metadata_proxy", "proxy.json"],
                cwd=tmp_path,
                stdout=log,
                stderr=log,
                pass_fds=fds,
            )
        for sock in listeners:
            sock.close()
        running = Running(name, ports_file)
        wait_until(lambda: b" 200 " in running.ask("127.0.0.2"), timeout=15, what="the proxy")
        Echo.seen.clear()
        yield running
    finally:
        if process is not None:
            process.kill()
            process.wait(10)
        netns.delete(name)
        upstream.shutdown()
        upstream.server_close()
        thread.join(10)


def _body(answer: bytes) -> dict[str, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answer
    found: dict[str, str] = json.loads(body)
    return found


def test_callers_are_their_ports_and_a_foreign_source_is_refused(proxy: Running) -> None:
    headers = _body(proxy.ask("127.0.0.2"))
    # A's identity, replacing what the caller claimed (inst-b), and its address appended.
    assert headers["X-Instance-ID"] == "inst-a"
    assert headers["X-Instance-ID-Signature"] == "sig-a"
    assert headers["X-Forwarded-For"] == "127.0.0.2"
    # From A's IPv6 address too, the address without a zone.
    assert _body(proxy.ask("fd64::2"))["X-Forwarded-For"] == "fd64::2"
    # No port's address: 404, and nothing reaches the service.
    Echo.seen.clear()
    assert proxy.ask("127.0.0.3").startswith(b"HTTP/1.1 404 ")
    assert proxy.ask("127.0.0.4").startswith(b"HTTP/1.1 404 ")  # B is not attached yet
    assert Echo.seen == []
    # B attached: the driver replaces the map; the running proxy reads it again.
    proxy.ports_file.write_bytes(proxy_ports([A, B], HEADERS))
    assert _body(proxy.ask("127.0.0.4"))["X-Instance-ID"] == "inst-b"
    # A malformed request is answered 400 without reaching the service.
    Echo.seen.clear()
    bad = b"GET /x HTTP/1.1\r\nHost : x\r\n\r\n"
    assert proxy.ask("127.0.0.2", bad).startswith(b"HTTP/1.1 400 ")
    assert Echo.seen == []


def test_a_flooding_guest_leaves_room_for_the_others(proxy: Running) -> None:
    proxy.ports_file.write_bytes(proxy_ports([A, B], HEADERS))
    held = [proxy.hold("127.0.0.2") for _ in range(PER_CALLER)]
    try:
        wait_until(
            lambda: proxy.ask("127.0.0.2").startswith(b"HTTP/1.1 503 "),
            timeout=10,
            what="A's next connection refused",
        )
        assert _body(proxy.ask("127.0.0.4"))["X-Instance-ID"] == "inst-b"
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: b" 200 " in proxy.ask("127.0.0.2"), timeout=10, what="A served again")
