"""Slow and many connections on the metadata listener (issue 30): a head or a body sent slowly
gets 408 and the connection is closed, one that sends nothing is closed, and one source address
may hold only [metadata] max_connections_per_address connections (503 at once for the
others); other guests are served meanwhile, and metadata proxies are never capped."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cloudseed.schema import sync as schema_sync
from cloudseed.settings import Settings
from tests.support.cloud import Cloud
from tests.support.databases import make_settings
from tests.support.guests import MetadataServer, boot
from tests.support.metrics import scrape, value
from tests.support.server import running_metadata
from tests.support.waiting import wait_until

CAP = 5
GET = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
TIMEOUTS = "cloudseed_http_connection_timeouts_total"
REFUSED = "cloudseed_http_connections_refused_total"


def _settings(tmp: Path, **env: str) -> Settings:
    settings = make_settings(f"sqlite:///{tmp}/cloudseed.sqlite", tmp, **env)
    schema_sync.sync(settings)
    return settings


@pytest.fixture(scope="module")
def quick_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Deadlines of a second or two."""
    settings = _settings(
        tmp_path_factory.mktemp("quick"),
        CLOUDSEED_WSGI__HEADER_TIMEOUT="1",
        CLOUDSEED_WSGI__FIRST_REQUEST_TIMEOUT="1",
        CLOUDSEED_METADATA__REQUEST_TIMEOUT="2",
    )
    with running_metadata(settings) as url:
        yield url


@pytest.fixture(scope="module")
def capped_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cap of CAP connections per address; 127.0.0.250 is a trusted proxy."""
    settings = _settings(
        tmp_path_factory.mktemp("capped"),
        CLOUDSEED_METADATA__MAX_CONNECTIONS_PER_ADDRESS=str(CAP),
        CLOUDSEED_METADATA__TRUSTED_PROXIES="127.0.0.250",
    )
    with running_metadata(settings) as url:
        yield url


def _connect(base: str, source: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes (or resets) the connection."""
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


def _answer(sock: socket.socket) -> bytes:
    """One answer on a kept-alive connection: its head and its content-length's body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def _guest_served(base: str, source: str = "127.0.0.2") -> float:
    """A request from another guest is answered as usual; how long it took."""
    started = time.monotonic()
    with httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=10) as guest:
        r = guest.get(base + "/")
    assert r.status_code in (200, 404), r.text
    return time.monotonic() - started


def test_a_head_sent_slowly_gets_408_while_others_are_served(quick_url: str) -> None:
    before = value(scrape(quick_url), TIMEOUTS, listener="metadata", deadline="header")
    with _connect(quick_url, "127.0.0.3") as slow:
        slow.sendall(b"GET /openstack HTTP/1.1\r\nHost: x\r\nX-Half: ")
        started = time.monotonic()
        _guest_served(quick_url)
        assert select.select([slow], [], [], 0)[0] == []  # served while the head waits
        answer = _read_all(slow)
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert b"\r\nconnection: close\r\n" in answer
    assert 0.9 < waited < 3, waited
    after = value(scrape(quick_url), TIMEOUTS, listener="metadata", deadline="header")
    assert after == before + 1


def test_a_second_request_sent_slowly_on_a_kept_alive_connection_gets_408(quick_url: str) -> None:
    with _connect(quick_url, "127.0.0.3") as conn:
        conn.sendall(GET)
        assert _answer(conn).split(b" ")[1] in (b"200", b"404")
        conn.sendall(b"GET / HTTP/1.1\r\n")
        started = time.monotonic()
        answer = _read_all(conn)
        assert 0.9 < time.monotonic() - started < 3
    assert answer.startswith(b"HTTP/1.1 408 "), answer


def test_a_head_trickled_byte_by_byte_is_still_bounded(quick_url: str) -> None:
    """Bytes keep coming, slowly: the deadline counts from the first, not the last."""
    with _connect(quick_url, "127.0.0.3") as conn:
        started = time.monotonic()
        answer = b""
        for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 100:
            try:
                conn.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            ready, _, _ = select.select([conn], [], [], 0.1)  # the client's pace
            if ready:
                answer = _read_all(conn)
                break
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert time.monotonic() - started < 3


def test_a_body_sent_slowly_is_cut_at_the_deadline(quick_url: str) -> None:
    """The caller is unknown here, so it is answered (404) before its body is read; the
    body never comes whole, and the connection is closed at the request's deadline with no
    second answer. (A known guest's password post: the last test.)"""
    with _connect(quick_url, "127.0.0.3") as conn:
        conn.sendall(
            b"POST /openstack/latest/password HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n"
            b"half a password"
        )
        started = time.monotonic()
        answer = _read_all(conn)
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 404 ") and answer.count(b"HTTP/1.1") == 1, answer
    assert 1.9 < waited < 4, waited


def test_a_connection_that_sends_nothing_is_closed(quick_url: str) -> None:
    before = value(scrape(quick_url), TIMEOUTS, listener="metadata", deadline="first_request")
    with _connect(quick_url, "127.0.0.3") as silent:
        started = time.monotonic()
        assert _read_all(silent) == b""  # closed without a word
        waited = time.monotonic() - started
    assert 0.9 < waited < 3, waited
    after = value(scrape(quick_url), TIMEOUTS, listener="metadata", deadline="first_request")
    assert after == before + 1


def _fill(base: str, source: str, extra: int) -> tuple[list[socket.socket], list[bytes]]:
    """Open CAP + ``extra`` connections from ``source`` without sending anything; the ones
    the server answered at once (read to their end) and the others, still open."""
    conns = [_connect(base, source) for _ in range(CAP + extra)]
    refused: list[bytes] = []

    def answered() -> bool:
        ready, _, _ = select.select(conns, [], [], 0.05)
        for conn in ready:
            refused.append(_read_all(conn))
            conns.remove(conn)
            conn.close()
        return len(refused) >= extra

    if extra:
        wait_until(answered, timeout=10, what=f"{extra} connections refused")
    return conns, refused


def _served_on(conns: list[socket.socket]) -> list[bytes]:
    """The status of a request sent on each connection."""
    statuses = []
    for conn in conns:
        conn.sendall(GET)
        statuses.append(_answer(conn).split(b" ")[1])
    return statuses


def test_one_address_over_the_cap_is_refused_at_once_and_others_are_served(
    capped_url: str,
) -> None:
    before = value(scrape(capped_url), REFUSED, listener="metadata")
    held, refused = _fill(capped_url, "127.0.0.3", extra=3)
    try:
        assert len(refused) == 3
        for answer in refused:
            assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer
            assert b"\r\nretry-after: 1\r\n" in answer and b"\r\nconnection: close\r\n" in answer
        assert _guest_served(capped_url, "127.0.0.2") < 2  # another guest, meanwhile
        assert all(status in (b"200", b"404") for status in _served_on(held))
        assert value(scrape(capped_url), REFUSED, listener="metadata") == before + 3
    finally:
        for conn in held:
            conn.close()


def test_closed_connections_are_counted_out(capped_url: str) -> None:
    """Round after round the address gets exactly CAP connections again: no count leaks,
    neither of the admitted nor of the refused ones."""
    for _ in range(20):

        def exactly_the_cap_admitted() -> bool:
            held, refused = _fill(capped_url, "127.0.0.4", extra=2)
            try:
                return (
                    len(held) == CAP
                    and len(refused) == 2
                    and all(status in (b"200", b"404") for status in _served_on(held))
                )
            finally:
                for conn in held:
                    conn.close()

        # The server hears of the closes a moment after the client makes them.
        wait_until(exactly_the_cap_admitted, timeout=10, what="CAP connections admitted")


def test_a_trusted_proxy_is_not_capped(capped_url: str) -> None:
    held, refused = _fill(capped_url, "127.0.0.250", extra=0)
    more = [_connect(capped_url, "127.0.0.250") for _ in range(CAP)]
    try:
        assert refused == []
        assert all(status in (b"200", b"404") for status in _served_on(held + more))
    finally:
        for conn in held + more:
            conn.close()


def test_behind_a_signing_proxy_nobody_is_capped(tmp_path: Path) -> None:
    """With [neutron] service_metadata_proxy every caller is a proxy relaying many guests."""
    settings = _settings(
        tmp_path,
        CLOUDSEED_METADATA__MAX_CONNECTIONS_PER_ADDRESS="2",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET="s",
    )
    with running_metadata(settings) as url:
        conns = [_connect(url, "127.0.0.3") for _ in range(6)]
        try:
            assert all(status != b"503" for status in _served_on(conns))
        finally:
            for conn in conns:
                conn.close()


@pytest.mark.databases
@pytest.mark.loopback_guests
def test_a_password_cut_short_by_the_deadline_is_not_kept(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud)
    with metadata_server(("metadata", {"request_timeout": 1})) as url:
        with _connect(url, guest.address) as conn:
            conn.sendall(
                b"POST /openstack/latest/password HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 20\r\n\r\nhalf-"
            )
            assert _read_all(conn).startswith(b"HTTP/1.1 408 ")
        with guest.client(url) as md:
            assert md.get("/openstack/latest/password").content == b""
            assert md.post("/openstack/latest/password", content=b"whole").status_code == 200
            assert md.get("/openstack/latest/password").content == b"whole"
        assert api.get(f"/v2.1/servers/{guest.id}/os-server-password").json() == {
            "password": "whole"
        }


def _rss_mib() -> int:
    # The server runs in a thread of this process: its RSS is theirs.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.databases
@pytest.mark.loopback_guests
def test_answers_a_guest_does_not_read_are_not_piled_up(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    """8 MB of pipelined requests for a cached guest's document, none of the answers read:
    the server stops reading once its answers wait, instead of holding them all (100 MB
    when every one was answered at once)."""
    guest = boot(api, cloud)
    with metadata_server() as url:
        with guest.client(url) as md:
            assert md.get("/openstack/latest/meta_data.json").status_code == 200  # cached
        request = b"GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: x\r\n\r\n"
        requests = request * (8_000_000 // len(request))
        before = _rss_mib()
        with _connect(url, guest.address) as conn:
            conn.setblocking(False)
            sent, last_sent = 0, time.monotonic()

            def all_sent_or_stalled() -> bool:
                nonlocal sent, last_sent
                try:
                    while sent < len(requests):
                        sent += conn.send(requests[sent : sent + 65536])
                        last_sent = time.monotonic()
                except BlockingIOError:  # the server is not reading: for a second, done
                    return time.monotonic() - last_sent > 1.0
                return True

            wait_until(all_sent_or_stalled, timeout=60, what="the requests sent or stalled")
            grown = _rss_mib() - before
        assert grown < 25, f"{grown} MiB held for {sent / 1e6:.1f} MB of requests"
        with guest.client(url) as md:  # and the guest is served again as usual
            assert md.get("/openstack/latest/meta_data.json").status_code == 200
