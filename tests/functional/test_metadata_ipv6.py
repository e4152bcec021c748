"""IPv6 callers of the metadata service, and ``[metadata] hop_limit`` on the wire.

The service runs with its listener made inside a network namespace of the test's own, as
``cloudseed serve`` makes it (dual-stack ``::``, port 8775), and every guest connects from an
address of that namespace's loopback, so each is a real source address the kernel reports, IPv6
and IPv4 alike (an IPv4 caller arrives as ``::ffff:a.b.c.d`` on the dual-stack socket):

- guests A (fd63::10) and B (fd63::11) on an IPv6 network, C (10.63.0.10) on an IPv4 one;
- fd63::99 is no guest's; fd63::250 and 10.63.0.250 are the trusted proxies.

Needs root and iproute2 (``NEEDS_NETNS``; CI runs as root). SQLite only.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from cloudseed.compute import netns
from cloudseed.db.engines import Database
from cloudseed.networks import service as networks
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, create_server, wait_for
from tests.support.guest_netns import NEEDS_NETNS, capture, namespace_prefix
from tests.support.server import running_metadata_in_namespace, with_options

pytestmark = [NEEDS_NETNS, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]

META = "/openstack/latest/meta_data.json"
TTL = ("X-aws-ec2-metadata-token-ttl-seconds", "60")
LOOPBACK_ADDRESSES = ("fd63::10", "fd63::11", "fd63::99", "fd63::250", "10.63.0.10", "10.63.0.250")


@dataclass
class Answer:
    status: int
    body: bytes


@dataclass
class Service:
    namespace: str
    ids: dict[str, str]

    def ask(
        self,
        source: str,
        path: str = META,
        *,
        method: str = "GET",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> Answer:
        def exchange() -> Answer:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                if ":" not in source:  # an IPv4 caller of the dual-stack listener
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                    sock.bind((f"::ffff:{source}", 0))
                    sock.connect(("::ffff:127.0.0.1", 8775))
                else:
                    sock.bind((source, 0))
                    sock.connect(("::1", 8775))
                lines = [f"{method} {path} HTTP/1.1", "Host: md", "Connection: close"]
                lines += [f"{k}: {v}" for k, v in headers]
                sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            return Answer(int(head.split()[1]), body)

        return netns.inside(self.namespace, exchange)

    def who(self, source: str, headers: tuple[tuple[str, str], ...] = ()) -> Any:
        """The guest whose data came back ("A", "B", "C"), or the status of a refusal."""
        answer = self.ask(source, headers=headers)
        if answer.status != 200:
            return answer.status
        uuid = json.loads(answer.body)["uuid"]
        return next(name for name, i in self.ids.items() if i == uuid)


@pytest.fixture()
def namespace() -> Iterator[str]:
    name = f"{namespace_prefix()}-md"
    try:
        netns.create(name)  # in the try: a half-made namespace goes too
        for address in LOOPBACK_ADDRESSES:
            prefix = "/128" if ":" in address else "/32"
            netns.ip(name, "address", "add", address + prefix, "dev", "lo")
        yield name
    finally:
        netns.delete(name)


@pytest.fixture()
def guests(api: httpx.Client, cloud: Cloud, api_db: Database) -> dict[str, str]:
    ids = api_db.run(
        lambda s: [
            networks.add_network(s, name="v6", cidr="fd63::/64", gateway="fd63::1").uuid,
            networks.add_network(s, name="v4", cidr="10.63.0.0/24", gateway="10.63.0.1").uuid,
        ],
        write=True,
    )
    found = {}
    for name, (network, address) in {
        "A": (ids[0], "fd63::10"),
        "B": (ids[0], "FD63:0::11"),  # as an operator may write it: stored as fd63::11
        "C": (ids[1], "10.63.0.10"),
    }.items():
        server = create_server(
            api, cloud, "2.37", name=name, networks=[{"uuid": network, "fixed_ip": address}]
        )
        found[name] = wait_for(api, server["id"], "ACTIVE", version="2.37")["id"]
    return found


def start(
    settings: Settings, namespace: str, api_db: Database, **metadata: Any
) -> Any:  # a context manager
    settings = with_options(settings, "default", metadata_listen="::", metadata_listen_port=8775)
    settings = with_options(settings, "metadata", **metadata)
    return running_metadata_in_namespace(settings, namespace, api_db=api_db)


def test_ipv6_callers_are_found_by_their_source_address_and_through_trusted_proxies(
    migrated_settings: Settings, api_db: Database, namespace: str, guests: dict[str, str]
) -> None:
    service = Service(namespace, guests)
    trusted = "fd63::250, 10.63.0.250/32"
    with start(migrated_settings, namespace, api_db, trusted_proxies=trusted):
        # Straight from the guest: IPv6 hits, IPv4 on the dual-stack socket, a miss.
        assert service.who("fd63::10") == "A"
        assert service.who("fd63::11") == "B"
        assert service.who("10.63.0.10") == "C"
        assert service.who("fd63::99") == 404
        # A guest's own X-Forwarded-For means nothing: B naming A is B.
        assert service.who("fd63::11", (("X-Forwarded-For", "fd63::10"),)) == "B"
        assert service.who("fd63::99", (("X-Forwarded-For", "fd63::10"),)) == 404
        # Through the trusted IPv6 proxy: the right-most untrusted hop, in any IPv6 spelling.
        for hops, expected in (
            ("fd63::10", "A"),
            ("[fd63:0:0::10]:4711", "A"),
            ("FD63::10", "A"),
            ("fd63::11, fd63::10", "A"),
            ("fd63::10, fd63::250", "A"),  # a trusted hop after the guest's
            ("fd63::99", 404),
            ("fd63::10, fd63::99", 404),
            ("fe80::10%eth0", 404),
            ("", 404),
        ):
            assert service.who("fd63::250", (("X-Forwarded-For", hops),)) == expected, hops
        # The IPv4 proxy forwarding an IPv6 guest, and the IPv6 proxy an IPv4 one.
        assert service.who("10.63.0.250", (("X-Forwarded-For", "fd63::11"),)) == "B"
        assert service.who("fd63::250", (("X-Forwarded-For", "10.63.0.10"),)) == "C"
        # An IPv6-only guest has no local-ipv4; its ipv6s are its own.
        assert service.ask("fd63::10", "/latest/meta-data/local-ipv4").body == b""
        assert service.ask("fd63::11", "/latest/meta-data/network/").body == b"interfaces/"
        # Session tokens: straight from an IPv6 guest, and through the proxy with its one hop;
        # not past a second untrusted hop.
        token = service.ask("fd63::10", "/latest/api/token", method="PUT", headers=(TTL,))
        assert token.status == 200
        used = service.ask(
            "fd63::10",
            "/latest/meta-data/instance-id",
            headers=(("X-aws-ec2-metadata-token", token.body.decode()),),
        )
        assert used.status == 200
        via = (TTL, ("X-Forwarded-For", "fd63::10"))
        assert (
            service.ask("fd63::250", "/latest/api/token", method="PUT", headers=via).status == 200
        )
        twice = (TTL, ("X-Forwarded-For", "fd63::11, fd63::10"))
        assert (
            service.ask("fd63::250", "/latest/api/token", method="PUT", headers=twice).status == 403
        )


def test_ipv6_trusted_proxy_networks_and_the_forwarded_header(
    migrated_settings: Settings, api_db: Database, namespace: str, guests: dict[str, str]
) -> None:
    service = Service(namespace, guests)
    with start(
        migrated_settings,
        namespace,
        api_db,
        trusted_proxies="fd63::200/120",
        forwarded_header="forwarded",
    ):
        assert service.who("fd63::250", (("Forwarded", 'for="[fd63::10]:4711"'),)) == "A"
        assert service.who("fd63::250", (("Forwarded", "for=fd63::10, for=_hidden"),)) == 404
        # X-Forwarded-For is the guest's own here: never merged.
        assert service.who("fd63::250", (("X-Forwarded-For", "fd63::10"),)) == 404
        # Outside the trusted network: the source address is the caller.
        assert service.who("fd63::11", (("Forwarded", "for=fd63::10"),)) == "B"


@pytest.mark.parametrize("hop_limit", [1, 3])
def test_the_token_answer_leaves_with_the_hop_limit(
    migrated_settings: Settings,
    api_db: Database,
    namespace: str,
    guests: dict[str, str],
    hop_limit: int,
) -> None:
    """``[metadata] hop_limit``: the segments that carry the token PUT's answer have that IP
    TTL (IPv4) or hop limit (IPv6), read from a capture on the namespace's loopback; the
    request's own segments keep the system's 64."""
    service = Service(namespace, guests)
    with start(migrated_settings, namespace, api_db, hop_limit=hop_limit):
        for source in ("fd63::10", "10.63.0.10"):
            with capture(namespace, "lo") as frames:
                token = service.ask(source, "/latest/api/token", method="PUT", headers=(TTL,))
            assert token.status == 200
            answers = [h for h, payload in frames if token.body in payload]
            requests = [h for h, payload in frames if b"PUT /latest/api/token" in payload]
            assert answers and requests, frames
            assert {h for h in answers} == {hop_limit}, source
            assert {h for h in requests} == {64}, source


def test_a_servers_own_hop_limit_for_its_token_answers(
    migrated_settings: Settings,
    api: httpx.Client,
    api_db: Database,
    namespace: str,
    guests: dict[str, str],
) -> None:
    """2.109's ``http_put_response_hop_limit``: the token PUT's answer leaves with the server's
    own hop limit (IPv6 guest A: 2, IPv4 guest C: 5), set on the connection; a server without
    one keeps the listener's (here the system's 64)."""
    for name, hops in (("A", 2), ("C", 5)):
        r = api.put(
            f"/v2.1/servers/{guests[name]}",
            headers={"OpenStack-API-Version": "compute 2.109"},
            json={"server": {"metadata_options": {"http_put_response_hop_limit": hops}}},
        )
        assert r.status_code == 200, r.text
    service = Service(namespace, guests)
    with start(migrated_settings, namespace, api_db):
        for source, expected in (("fd63::10", 2), ("10.63.0.10", 5), ("fd63::11", 64)):
            with capture(namespace, "lo") as frames:
                token = service.ask(source, "/latest/api/token", method="PUT", headers=(TTL,))
            assert token.status == 200
            answers = [h for h, payload in frames if token.body in payload]
            assert answers and {h for h in answers} == {expected}, source
