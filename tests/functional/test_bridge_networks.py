"""Bridged networks for real, without QEMU (docs/qemu-driver.md, "Bridged networks"): the
driver's own code builds each network's namespace, bridge, port security, dnsmasq and metadata
proxy, and every guest is a namespace of its own on a veth pair that stands in for its tap,
with its port's MAC and addresses (tests/support/guest_netns.py). Servers are created through
the compute API (the fake driver) on three bridged networks; the proxies forward to a real
metadata service in proxy mode, so each answer is the guest's own as the service decides it.

- blue, 10.61.0.0/24, the EC2 address on: guests A (.10) and B (.11);
- green, 10.62.0.0/24: guest C (.10);
- six, fd61::/64 (IPv6 only), the EC2 address on: guest D (fd61::10).

Needs root, iproute2, nftables and dnsmasq (``NEEDS_NETNS``: CI runs as root, and a skip
fails CI). SQLite only: the database plays no part in what is tested here. And egress, on a
network of its own without servers.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.agent.guests import guest_spec
from cloudseed.compute import netns
from cloudseed.compute.bridge_networks import BridgeNetworks
from cloudseed.compute.bridge_plan import (
    BridgedNetwork,
    BridgedPort,
    bridged_ports,
    namespace_name,
)
from cloudseed.db.engines import Database
from cloudseed.networks import service as networks
from cloudseed.servers import records
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, b64, create_server, wait_for
from tests.support.guest_netns import (
    NEEDS_NETNS,
    GuestNs,
    Offer,
    arp_reply,
    capture,
    dhcp_discover,
    dhcp_offer,
    guest_namespaces,
    namespace_prefix,
    neighbour_advert,
    nothing_left,
    parse_offer,
    plug,
)
from tests.support.guests import SECRET
from tests.support.server import running_metadata, with_options

pytestmark = NEEDS_NETNS
ON_SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

META = "/openstack/latest/meta_data.json"
HOP_LIMIT = 1  # [metadata] hop_limit, as the driver hands it to the proxies


@dataclass
class Bridged:
    networks: BridgeNetworks
    guests: dict[str, GuestNs]
    servers: dict[str, str]  # guest letter -> server id

    def uuid_seen_by(self, letter: str, host: str, **more: object) -> str | None:
        answer = self.guests[letter].request(host, META, **more)  # type: ignore[arg-type]
        if answer is None:
            return None
        assert answer.status == 200, (answer.status, answer.body)
        return str(json.loads(answer.body)["uuid"])


def _network(session: Session, name: str, cidr: str, gateway: str, *, ec2: bool) -> str:
    return networks.add_network(
        session, name=name, cidr=cidr, gateway=gateway, mode="bridge", ec2_metadata_address=ec2
    ).uuid


@pytest.fixture()
def bridged(
    api: httpx.Client,
    cloud: Cloud,
    api_db: Database,
    cell_db: Database,
    migrated_settings: Settings,
    tmp_path: Path,
) -> Iterator[Bridged]:
    ids = api_db.run(
        lambda s: {
            "blue": _network(s, "blue", "10.61.0.0/24", "10.61.0.1", ec2=True),
            "green": _network(s, "green", "10.62.0.0/24", "10.62.0.1", ec2=False),
            "six": _network(s, "six", "fd61::/64", "fd61::1", ec2=True),
        },
        write=True,
    )
    plan = {"A": ("blue", "10.61.0.10"), "B": ("blue", "10.61.0.11"), "C": ("green", "10.62.0.10")}
    plan["D"] = ("six", "fd61::10")
    servers = {}
    for letter, (net, address) in plan.items():
        server = create_server(
            api,
            cloud,
            "2.37",
            name=f"guest-{letter}",
            user_data=b64(f"{letter}'s secret"),
            networks=[{"uuid": ids[net], "fixed_ip": address}],
        )
        servers[letter] = wait_for(api, server["id"], "ACTIVE", version="2.37")["id"]
    settings = with_options(
        migrated_settings,
        "neutron",
        service_metadata_proxy=True,
        metadata_proxy_shared_secret=SECRET,
    )
    prefix = namespace_prefix()
    with (
        running_metadata(settings, api_db=api_db) as url,
        guest_namespaces(prefix) as made,
    ):
        port = int(url.rsplit(":", 1)[1].strip("/"))
        bridge = BridgeNetworks(
            tmp_path / "state",
            host=prefix,
            secret=SECRET,
            upstream=("127.0.0.1", port),
            hop_limit=HOP_LIMIT,
        )
        networks_left = namespace_name(bridge.tag, "")
        with nothing_left(networks_left, bridge.root):
            try:
                guests = {}
                for letter, server_id in servers.items():
                    spec = guest_spec(cell_db.run(partial(records.load, uuid=server_id)))
                    ((_, raw),) = bridged_ports(spec.ports)
                    network = BridgedNetwork.of_port(raw)
                    with bridge.locked():
                        bridge.ensure(network)
                    port_of = BridgedPort.of_port(raw, instance_id=server_id, tenant_id="proj")
                    guests[letter] = plug(bridge, f"{prefix}-{letter.lower()}", network, port_of)
                    made.append(guests[letter])
                yield Bridged(bridge, guests, servers)
            finally:
                with bridge.locked():
                    bridge.sweep({})
            assert not netns.names(networks_left), "the sweep left a namespace"
    assert not netns.names(prefix), "a namespace of the test outlived it"


# -- isolation --------------------------------------------------------------------------------


@ON_SQLITE
def test_guests_on_one_network_reach_each_other_and_no_other_network(bridged: Bridged) -> None:
    a, b, c = (bridged.guests[x] for x in "ABC")
    peers_of_b, peers_of_c = b.listen(7000), c.listen(7000)
    assert a.connect("10.61.0.11", 7000) == b"hello from " + b.name.encode()
    assert peers_of_b() == ["::ffff:10.61.0.10"]
    # Green's guest is up and reachable on its own network (its gateway answers it)...
    assert c.connect("10.62.0.1", 9, timeout=0.5) is None  # nothing listens: refused, not lost
    # ...and nothing crosses between networks, in either direction: no route, no link.
    assert a.connect("10.62.0.10", 7000, timeout=0.5) is None
    assert c.connect("10.61.0.10", 7000, timeout=0.5) is None
    assert peers_of_c() == []
    # Without egress the namespace has no way out and routes nothing.
    namespace = bridged.networks.namespace(a.network.network_id)
    assert "default" not in netns.ip(namespace, "route")
    assert a.connect("192.0.2.1", 80, timeout=0.5) is None


# -- the metadata proxy -----------------------------------------------------------------------


@ON_SQLITE
def test_each_guest_gets_its_own_metadata_at_every_address(bridged: Bridged) -> None:
    ids = bridged.servers
    assert bridged.uuid_seen_by("A", "169.254.169.254") == ids["A"]
    assert bridged.uuid_seen_by("B", "169.254.169.254") == ids["B"]
    assert bridged.uuid_seen_by("C", "169.254.169.254") == ids["C"]
    # IPv6 link-local with eth0's zone: the guest asks from its EUI-64 link-local address.
    assert bridged.uuid_seen_by("A", "fe80::a9fe:a9fe") == ids["A"]
    assert bridged.uuid_seen_by("D", "fe80::a9fe:a9fe") == ids["D"]
    # EC2's IPv6 address, through the IPv6 network's gateway (the namespace), from D's fixed
    # address; and on blue (IPv4) on-link from A's link-local address.
    assert bridged.uuid_seen_by("D", "fd00:ec2::254") == ids["D"]
    bridged.guests["A"].ip("-6", "route", "add", "fd00:ec2::254", "dev", "eth0")
    assert bridged.uuid_seen_by("A", "fd00:ec2::254") == ids["A"]
    # Green does not enable the EC2 address: nothing answers there.
    bridged.guests["C"].ip("-6", "route", "add", "fd00:ec2::254", "dev", "eth0")
    assert bridged.guests["C"].request("fd00:ec2::254", META, timeout=1.0) is None
    # The EC2 tree and user data through the same proxy; the caller's IPv4 is local-ipv4.
    answer = bridged.guests["B"].request("169.254.169.254", "/latest/meta-data/local-ipv4")
    assert answer is not None and answer.body == b"10.61.0.11"
    answer = bridged.guests["D"].request("fe80::a9fe:a9fe", "/openstack/latest/user_data")
    assert answer is not None and answer.body == b"D's secret"
    d_mac = bridged.guests["D"].port.mac
    ipv6s = f"/latest/meta-data/network/interfaces/macs/{d_mac}/ipv6s"
    answer = bridged.guests["D"].request("fe80::a9fe:a9fe", ipv6s)
    assert answer is not None and answer.body == b"fd61::10"
    _headers_a_guest_sends_are_replaced(bridged)
    _session_tokens(bridged)


def _headers_a_guest_sends_are_replaced(bridged: Bridged) -> None:
    """A's request naming B (forged instance id, signature, tenant, X-Forwarded-For) is A's."""
    b = bridged.servers["B"]
    forged = (
        ("X-Instance-ID", b),
        ("X-Instance-ID-Signature", "0" * 64),
        ("X-Tenant-ID", "proj"),
        ("X-Forwarded-For", "10.61.0.11"),
    )
    assert bridged.uuid_seen_by("A", "169.254.169.254", headers=forged) == bridged.servers["A"]


def _session_tokens(bridged: Bridged) -> None:
    """A token is issued through the proxy (one hop, the proxy's) and bound to its guest."""
    a = bridged.guests["A"]
    ttl = (("X-aws-ec2-metadata-token-ttl-seconds", "60"),)
    # The answer leaves the proxy with [metadata] hop_limit as its TTL and hop limit (seen
    # on the guest's eth0); the guest's own segments have the system's 64.
    for host in ("169.254.169.254", "fe80::a9fe:a9fe"):
        with capture(a.name, "eth0") as frames:
            token = a.request(host, "/latest/api/token", method="PUT", headers=ttl)
        assert token is not None and token.status == 200
        assert {h for h, payload in frames if token.body in payload} == {HOP_LIMIT}, host
        assert {h for h, payload in frames if b"PUT /latest" in payload} == {64}, host
    assert token is not None
    used = a.request(
        "169.254.169.254",
        "/latest/meta-data/instance-id",
        headers=(("X-aws-ec2-metadata-token", token.body.decode()),),
    )
    assert used is not None and used.status == 200
    # B cannot use A's token: it is bound to A.
    stolen = bridged.guests["B"].request(
        "169.254.169.254",
        "/latest/meta-data/instance-id",
        headers=(("X-aws-ec2-metadata-token", token.body.decode()),),
    )
    assert stolen is not None and stolen.status == 401


# -- a guest that pretends ------------------------------------------------------------------


@ON_SQLITE
def test_a_spoofed_source_gets_nothing_of_another_guests_data(bridged: Bridged) -> None:
    """A sends as B (B's address, B's link-local address, B's MAC too, a made-up address):
    the bridge drops every such frame, so no answer at all comes back, least of all B's."""
    a = bridged.guests["A"]
    a.ip("address", "add", "10.61.0.11/32", "dev", "eth0")
    a.ip("address", "add", "10.61.0.99/32", "dev", "eth0")
    a.ip("address", "add", "fe80::f816:3eff:fe00:1/64", "dev", "eth0", "nodad")
    for source, host in (
        ("10.61.0.11", "169.254.169.254"),
        ("10.61.0.99", "169.254.169.254"),
        ("fe80::f816:3eff:fe00:1", "fe80::a9fe:a9fe"),
    ):
        assert a.request(host, META, source=source, timeout=0.5) is None, source
    # B still gets its own; then A announces B's address as its own (ARP): dropped.
    assert bridged.uuid_seen_by("B", "169.254.169.254") == bridged.servers["B"]
    _arp_for_another_guests_address_is_dropped(bridged)
    # With B's MAC as well as B's address: dropped as a foreign MAC on A's port.
    a.ip("link", "set", "eth0", "address", bridged.guests["B"].port.mac)
    assert a.request("169.254.169.254", META, source="10.61.0.11", timeout=0.5) is None


def _arp_for_another_guests_address_is_dropped(bridged: Bridged) -> None:
    a, b = bridged.guests["A"], bridged.guests["B"]
    namespace = bridged.networks.namespace(a.network.network_id)
    b_mac = b.port.mac
    assert b_mac in netns.ip(namespace, "neigh", "show", "10.61.0.11")
    bridge_mac = netns.ip(namespace, "link", "show", "csbr0").split("link/ether ")[1].split()[0]
    for _ in range(3):
        a.send_raw(
            arp_reply(
                sender_mac=a.port.mac,
                sender_ip="10.61.0.11",
                target_mac=bridge_mac,
                target_ip="10.61.0.1",
            )
        )
    # The same for IPv6: A advertises B's link-local address as its own.
    assert bridged.uuid_seen_by("B", "fe80::a9fe:a9fe") == bridged.servers["B"]
    assert b_mac in netns.ip(namespace, "-6", "neigh", "show", b.port.link_local)
    for _ in range(3):
        a.send_raw(
            neighbour_advert(
                sender_mac=a.port.mac, source=a.port.link_local, target=b.port.link_local
            )
        )
    time.sleep(0.1)  # what is dropped leaves no trace to wait for
    assert b_mac in netns.ip(namespace, "neigh", "show", "10.61.0.11")
    assert b_mac in netns.ip(namespace, "-6", "neigh", "show", b.port.link_local)
    assert bridged.uuid_seen_by("B", "169.254.169.254") == bridged.servers["B"]


@ON_SQLITE
def test_a_rogue_dhcp_servers_answer_does_not_reach_the_others(bridged: Bridged) -> None:
    """B runs a DHCP server; A asks for an address: only dnsmasq's offer (A's own address,
    from the gateway) arrives, though B heard the request and answered it."""
    a, b = bridged.guests["A"], bridged.guests["B"]
    rogue_answers: list[bytes] = []
    rogue = b.run(lambda: _udp(67))
    stop = threading.Event()

    def serve_rogue() -> None:
        while not stop.is_set():
            try:
                request, _ = rogue.recvfrom(4096)
            except TimeoutError:
                continue
            answer = dhcp_offer(request, your_ip="10.61.0.200", server_ip="10.61.0.11")
            rogue.sendto(answer, ("255.255.255.255", 68))
            rogue_answers.append(answer)

    thread = threading.Thread(target=serve_rogue, daemon=True)
    thread.start()
    client = a.run(lambda: _udp(68))
    try:
        client.sendto(dhcp_discover(a.port.mac, 0x1234ABCD), ("255.255.255.255", 67))
        offers: list[Offer] = []
        # Until dnsmasq's offer came and the rogue answered, and a little after that: the
        # rogue's answer, were it let through, would be on the wire by then.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and not (offers and rogue_answers):
            try:
                packet, _ = client.recvfrom(4096)
            except TimeoutError:
                continue
            if (offer := parse_offer(packet)) is not None:
                offers.append(offer)
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            try:
                packet, _ = client.recvfrom(4096)
            except TimeoutError:
                continue
            if (offer := parse_offer(packet)) is not None:
                offers.append(offer)
    finally:
        stop.set()
        thread.join(5)
        rogue.close()
        client.close()
    assert rogue_answers, "the rogue server never heard A's request"
    assert [(o.your_ip, o.server_id) for o in offers] == [("10.61.0.10", "10.61.0.1")]


def _udp(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"eth0")
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    return sock


# -- egress ----------------------------------------------------------------------------------


def test_egress_when_the_network_says_so(tmp_path: Path) -> None:
    """``--egress``: the namespace gets a user-mode uplink (slirp4netns), and a guest reaches
    a server on one of the host's own addresses through it (masqueraded), though not the
    host's loopback; the host's interfaces and firewall stay as they were."""
    host_address = _host_address()
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]
    seen: list[str] = []

    def accept() -> None:
        with server:
            try:
                conn, peer = server.accept()
            except OSError:
                return
            seen.append(peer[0])
            conn.sendall(b"hello from the host")
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    prefix = namespace_prefix()
    bridge = BridgeNetworks(tmp_path / "state", host=prefix, secret=SECRET, upstream=("::1", 1))
    network = BridgedNetwork("out", "10.65.0.0/24", "10.65.0.1", 1500, egress=True)
    port_e = BridgedPort("eeeeeeee-0000-0000-0000-000000000000", "fa:16:3e:00:00:0e",
                         ("10.65.0.10",), "inst-e", "proj")  # fmt: skip
    host_links = netns_free_links()
    with guest_namespaces(prefix), nothing_left(namespace_name(bridge.tag, ""), bridge.root):
        try:
            with bridge.locked():
                bridge.ensure(network)
            guest = plug(bridge, f"{prefix}-e", network, port_e)
            answer = None
            for _ in range(20):  # the uplink comes up a moment after slirp4netns starts
                answer = guest.connect(host_address, port, timeout=0.5)
                if answer is not None:
                    break
            assert answer == b"hello from the host"
            assert guest.connect("10.0.2.2", port, timeout=0.5) is None  # host loopback: no
        finally:
            server.close()
            with bridge.locked():
                bridge.sweep({})
    assert netns_free_links() == host_links


def _host_address() -> str:
    """One of the host's own IPv4 addresses (not loopback), where a test server listens."""
    out = subprocess.run(
        ["ip", "-4", "-o", "address", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    addresses = [out[i + 1].split("/")[0] for i, word in enumerate(out) if word == "inet"]
    assert addresses, "this host has no IPv4 address but loopback's"
    return addresses[0]


def netns_free_links() -> str:
    """The host's own interfaces, as ``ip -o link`` lists them (names and states)."""
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return "\n".join(line.split(" link/")[0] for line in out.splitlines())
