"""Answers at once (coalescing.py, MetadataApp.respond_now): a cached guest's documents are
written by the HTTP protocol without an ASGI cycle, byte for byte what the ASGI path sends
(a path with an escaped character still takes that path, so the two are compared), also to
a request that asks to close its connection, as cloud-init's do."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cloudseed.metadata.app import MetadataApp
from cloudseed.signing import sign
from tests.support.cloud import Cloud, b64
from tests.support.guests import SECRET, MetadataServer, boot

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

PATHS = [
    "/openstack",
    "/openstack/latest/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/network_data.json",
    "/openstack/latest/vendor_data2.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/user-data",
    "/",
]
NEUTRON = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})


@pytest.fixture()
def asgi_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths of the requests that reached the app's ASGI entry."""
    calls: list[str] = []
    original = MetadataApp.__call__

    async def counting(self: MetadataApp, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            calls.append(scope["path"])
        await original(self, scope, receive, send)

    monkeypatch.setattr(MetadataApp, "__call__", counting)
    yield calls


def by_the_asgi_path(path: str) -> str:
    """The same path in a form the protocol leaves to the ASGI path: its last character
    escaped (for "/", an empty query)."""
    if path == "/":
        return "/?"
    return f"{path[:-1]}%{ord(path[-1]):02X}"


def comparable(r: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = [(k, v) for k, v in r.headers.multi_items() if k not in ("date", "connection")]
    body = r.content
    if r.headers.get("content-type") == "application/json" and b"random_seed" in body:
        # meta_data.json: a fresh random seed in every answer, whichever path sends it.
        doc = json.loads(body)
        doc["random_seed"] = "..."
        body = json.dumps(doc).encode()
    return r.status_code, headers, body


def test_cached_documents_are_answered_at_once_as_the_asgi_path_would(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer, asgi_calls: list[str]
) -> None:
    guest = boot(api, cloud, user_data=b64("#cloud-config\n"), key_name="key1")
    signed = {
        "X-Instance-ID": guest.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, guest.id),
    }
    with metadata_server(NEUTRON) as url, httpx.Client(base_url=url, timeout=10) as md:
        md.get("/openstack", headers=signed)  # the guest is loaded (the ASGI path)
        asgi_calls.clear()
        for path in PATHS:
            fast = md.get(path, headers=signed)
            assert fast.status_code == 200, (path, fast.text)
            assert "connection" not in fast.headers
            slow = md.get(by_the_asgi_path(path), headers=signed)
            assert comparable(fast) == comparable(slow), path
            # Asked to close: the same answer, with uvicorn's connection: close.
            closing = md.get(path, headers={**signed, "Connection": "close"})
            assert closing.headers["connection"] == "close"
            assert comparable(closing) == comparable(fast), path
            # 304 and HEAD too.
            tag = {"If-None-Match": fast.headers["etag"]}
            not_modified = md.get(path, headers={**signed, **tag})
            assert not_modified.status_code == 304 and not_modified.content == b""
            assert comparable(not_modified) == comparable(
                md.get(by_the_asgi_path(path), headers={**signed, **tag})
            )
            head = md.head(path, headers=signed)
            assert head.status_code == 200 and head.content == b""
            assert head.headers["content-length"] == str(len(fast.content))
        # Only the escaped paths went the ASGI way.
        assert asgi_calls == [p for p in PATHS for _ in range(2)]


def test_what_is_not_answered_at_once_takes_the_asgi_path(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer, asgi_calls: list[str]
) -> None:
    guest = boot(api, cloud)
    signed = {
        "X-Instance-ID": guest.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, guest.id),
    }
    # Nothing loaded ahead: the guest's first request finds it not cached.
    cold = ("metadata", {"load_ahead_seconds": 0})
    with metadata_server(NEUTRON, cold) as url, httpx.Client(base_url=url, timeout=10) as md:
        # Not cached yet: loaded the ASGI way; then at once.
        assert md.get("/openstack/latest/meta_data.json", headers=signed).status_code == 200
        assert md.get("/openstack/latest/meta_data.json", headers=signed).status_code == 200
        assert asgi_calls == ["/openstack/latest/meta_data.json"]
        asgi_calls.clear()
        refused = [
            ({**signed, "X-Instance-ID-Signature": sign("wrong", guest.id)}, 403),
            ({**signed, "X-Tenant-ID": "someone-else"}, 404),
        ]
        for headers, status in refused:
            assert md.get("/openstack/latest/meta_data.json", headers=headers).status_code == status
        # Queries, unknown paths, other methods, token requests: the ASGI path.
        assert md.get("/openstack/latest/meta_data.json?x=1", headers=signed).status_code == 200
        assert md.get("/nowhere/at/all", headers=signed).status_code == 404
        assert md.post("/openstack/latest/meta_data.json", headers=signed).status_code == 405
        ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        assert md.put("/latest/api/token", headers={**signed, **ttl}).status_code == 200
        assert len(asgi_calls) == 6
        # The same kept-alive connection then answers at once again.
        assert md.get("/latest/meta-data/", headers=signed).status_code == 200
        assert len(asgi_calls) == 6


def _exchange(url: str, raw: bytes, answers: int) -> list[bytes]:
    """``raw`` sent in one write on one connection; the first ``answers`` responses' status
    lines and bodies, read as they come."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        buffer = b""
        found: list[bytes] = []
        while len(found) < answers:
            head_end = buffer.find(b"\r\n\r\n")
            if head_end >= 0:
                head = buffer[:head_end].decode("latin-1")
                length = next(
                    (
                        int(line.split(":")[1])
                        for line in head.split("\r\n")
                        if line.lower().startswith("content-length:")
                    ),
                    0,
                )
                if len(buffer) >= head_end + 4 + length:
                    body = buffer[head_end + 4 : head_end + 4 + length]
                    found.append(head.split("\r\n")[0].encode() + b" " + body)
                    buffer = buffer[head_end + 4 + length :]
                    continue
            chunk = sock.recv(65536)
            if not chunk:
                break
            buffer += chunk
        return found


def test_edge_cases_of_the_http_layer_answer_as_uvicorns_path_does(
    api: httpx.Client,
    cloud: Cloud,
    metadata_server: MetadataServer,
    asgi_calls: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    guest = boot(api, cloud, user_data=b64("#cloud-config\n"))
    headers = (
        f"X-Instance-ID: {guest.id}\r\nX-Tenant-ID: proj\r\n"
        f"X-Instance-ID-Signature: {sign(SECRET, guest.id)}\r\n"
    )

    def get(path: str, extra: str = "", version: str = "1.1") -> bytes:
        return f"GET {path} HTTP/{version}\r\nHost: x\r\n{headers}{extra}\r\n".encode()

    with metadata_server(NEUTRON) as url:
        assert _exchange(url, get("/openstack/latest/user_data"), 1) == [
            b"HTTP/1.1 200 OK #cloud-config\n"
        ]
        asgi_calls.clear()
        # Pipelined: three requests in one write, answered in order, at once.
        three = get("/openstack/latest/user_data") + get("/openstack") + get("/latest/user-data")
        answers = _exchange(url, three, 3)
        assert answers[0] == answers[2] == b"HTTP/1.1 200 OK #cloud-config\n"
        assert answers[1].startswith(b"HTTP/1.1 200 OK ") and b"latest" in answers[1]
        assert asgi_calls == []
        # A body sent with a GET is read and dropped; the connection goes on.
        with_body = get("/openstack/latest/user_data", "Content-Length: 5\r\n") + b"hello"
        answers = _exchange(url, with_body + get("/openstack/latest/user_data"), 2)
        assert answers == [b"HTTP/1.1 200 OK #cloud-config\n"] * 2
        assert asgi_calls == []
        # An escaped path and HTTP/1.0 take the ASGI path, with the same answer.
        escaped = _exchange(url, get("/openstack/latest/user%5Fdata"), 1)
        old = _exchange(url, get("/openstack/latest/user_data", version="1.0"), 1)
        assert escaped == [b"HTTP/1.1 200 OK #cloud-config\n"]
        assert old == [b"HTTP/1.1 200 OK #cloud-config\n"]
        assert asgi_calls == ["/openstack/latest/user_data"] * 2
        # Asked to close: answered at once, then closed; a request pipelined after it gets
        # no answer, as on uvicorn's path.
        asgi_calls.clear()
        closing = get("/openstack/latest/user_data", "Connection: close\r\n")
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(closing + get("/openstack"))
            received = b""
            while chunk := sock.recv(65536):  # until the server closes the connection
                received += chunk
        assert received.startswith(b"HTTP/1.1 200 OK\r\n")
        assert received.count(b"HTTP/1.1 ") == 1
        assert b"\r\nconnection: close\r\n" in received
        assert received.endswith(b"\r\n\r\n#cloud-config\n")
        assert "/openstack/latest/user_data" not in asgi_calls
        # Bytes that are not ASCII in the path: refused as before, nothing logged as a failure.
        raw = get("/openstack/latest/user_data").replace(b"user_data", b"user_d\xe9ta")
        refused = _exchange(url, raw, 1)
        assert refused and refused[0].startswith(b"HTTP/1.1 4")
        assert "respond_now failed" not in caplog.text
