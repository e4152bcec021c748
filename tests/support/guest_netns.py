"""Guests without QEMU, for the bridged networks' tests: each guest is a network namespace of
its own whose ``eth0`` is one end of a veth pair, the other end standing in the network's
namespace under the port's device name, exactly where the driver puts a guest's tap. The guest
end has the port's MAC, so to the bridge, dnsmasq and the metadata proxy it is the guest.

These tests need root, iproute2, nftables, dnsmasq and slirp4netns (tools/debian-packages.sh
installs them;
CI runs as root): ``NEEDS_NETNS`` skips with the reason otherwise, and CI fails on any skip.
Every namespace made here is named ``cloudseed-t<random>-...`` and removed by its test.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from cloudseed.compute import netns
from cloudseed.compute.bridge_networks import BridgeNetworks
from cloudseed.compute.bridge_plan import BridgedNetwork, BridgedPort
from cloudseed.compute.errors import DriverError
from cloudseed.compute.helper_processes import alive
from cloudseed.programs.run import which

T = TypeVar("T")

_MISSING = [p for p in ("ip", "nft", "dnsmasq", "slirp4netns") if which(p) is None]
NEEDS_NETNS = pytest.mark.skipif(
    os.geteuid() != 0 or bool(_MISSING) or not os.path.exists("/dev/net/tun"),
    reason="bridged networks need root, /dev/net/tun and ip, nft, dnsmasq, slirp4netns "
    "(Debian: iproute2, nftables, dnsmasq-base, slirp4netns; missing: "
    f"{', '.join(_MISSING) or 'none'})",
)


def namespace_prefix() -> str:
    """A prefix for one test's namespaces: ``cloudseed-t<8 hex>``."""
    return f"cloudseed-t{secrets.token_hex(4)}"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class GuestNs:
    """One stand-in guest: a namespace with ``eth0`` on a bridged network."""

    name: str
    port: BridgedPort
    network: BridgedNetwork
    threads: list[threading.Thread] = field(default_factory=list)

    def ip(self, *args: str) -> str:
        return netns.ip(self.name, *args)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` in this guest's namespace (what it opens is the guest's)."""
        return netns.inside(self.name, fn)

    def request(
        self,
        host: str,
        path: str,
        *,
        method: str = "GET",
        headers: tuple[tuple[str, str], ...] = (),
        source: str | None = None,
        timeout: float = 3.0,
    ) -> Response | None:
        """One HTTP/1.1 request from the guest to ``host``:80 (a link-local ``host`` on
        eth0's zone), from ``source`` if given; None when nothing answers in ``timeout``."""

        def ask() -> Response | None:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                if source is not None:
                    scope = socket.if_nametoindex("eth0") if source.startswith("fe80") else 0
                    sock.bind((source, 0, 0, scope) if family == socket.AF_INET6 else (source, 0))
                scope = socket.if_nametoindex("eth0") if host.startswith("fe80") else 0
                try:
                    sock.connect((host, 80, 0, scope) if family == socket.AF_INET6 else (host, 80))
                    lines = [
                        f"{method} {path} HTTP/1.1",
                        "Host: metadata",
                        *(f"{k}: {v}" for k, v in headers),
                    ]
                    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
                    data = b""
                    while chunk := sock.recv(65536):
                        data += chunk
                except (TimeoutError, ConnectionError, OSError):
                    return None
            head, _, body = data.partition(b"\r\n\r\n")
            status_line, *header_lines = head.decode("latin-1").split("\r\n")
            fields = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
            return Response(int(status_line.split()[1]), fields, body)

        return self.run(ask)

    def listen(self, port: int) -> Callable[[], list[str]]:
        """A TCP server in the guest on ``port`` that records who connected; returns a
        function that lists the peers so far."""
        listener = self.run(lambda: _listening(port))
        peers: list[str] = []

        def accept() -> None:
            with listener:
                while True:
                    try:
                        conn, peer = listener.accept()
                    except OSError:
                        return
                    peers.append(str(peer[0]))
                    conn.sendall(b"hello from " + self.name.encode())
                    conn.close()

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        self.threads.append(thread)
        return lambda: list(peers)

    def connect(self, address: str, port: int, timeout: float = 1.0) -> bytes | None:
        """Open a TCP connection from the guest; what the other side says, None if nothing
        answers."""

        def attempt() -> bytes | None:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                try:
                    sock.connect((address, port))
                    return sock.recv(1024)
                except OSError:
                    return None

        return self.run(attempt)

    def send_raw(self, frame: bytes) -> None:
        """Send one Ethernet frame out of eth0 as it is (its source MAC included)."""

        def send() -> None:
            with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
                sock.bind(("eth0", 0))
                sock.send(frame)

        self.run(send)


def _listening(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("::", port))
    sock.listen(16)
    return sock


def plug(
    networks: BridgeNetworks, name: str, network: BridgedNetwork, port: BridgedPort
) -> GuestNs:
    """A new guest namespace ``name`` on ``network`` as ``port``: the veth's network end is
    the port's device, attached by the driver's own code (with the network's lock), and the
    guest end is configured as cloud-init would from network_data.json (static addresses,
    the gateway as default route)."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    guest = GuestNs(name, port, network)
    # No duplicate address detection in the stand-in guest (its eth0 is made below): an
    # address would stay unusable for a second or more, which the tests would only wait for.
    netns.sysctl(name, "net.ipv6.conf.default.accept_dad", "0")
    namespace = networks.namespace(network.network_id)
    netns.ip(namespace, "link", "add", port.device, "type", "veth", "peer", "name", "eth0",
             "netns", name)  # fmt: skip
    guest.ip("link", "set", "lo", "up")
    guest.ip("link", "set", "eth0", "address", port.mac, "mtu", str(network.mtu))
    guest.ip("link", "set", "eth0", "up")
    prefix = network.cidr.rsplit("/", 1)[1]
    for address in port.addresses:
        extra = ["nodad"] if ":" in address else []
        guest.ip("address", "add", f"{address}/{prefix}", "dev", "eth0", *extra)
    if network.gateway:
        family = "-6" if ":" in network.gateway else "-4"
        guest.ip(family, "route", "add", "default", "via", network.gateway)
    with networks.locked():
        networks.attach(network, port)
    wait_for_link_local(guest)
    return guest


def wait_for_link_local(guest: GuestNs, timeout: float = 10.0) -> None:
    """Until eth0's link-local address has passed duplicate address detection (before, the
    kernel will not send from it)."""
    deadline = time.monotonic() + timeout
    while "tentative" in guest.ip("-6", "address", "show", "dev", "eth0"):
        assert time.monotonic() < deadline, "eth0's link-local address stays tentative"
        time.sleep(0.05)


@contextlib.contextmanager
def guest_namespaces(prefix: str) -> Iterator[list[GuestNs]]:
    """A list the test fills with its guests; each one's namespace is removed at the end."""
    guests: list[GuestNs] = []
    with nothing_left(prefix):
        yield guests


@contextlib.contextmanager
def nothing_left(prefix: str, directory: Path | None = None) -> Iterator[None]:
    """Whatever the block leaves of bridged networks, removed at its end even when it fails
    (a test's safety net, not its check: a test asserts what the product cleaned up itself):
    every process working in ``directory`` or below it (metadata proxies, slirp4netns, QEMU),
    then every namespace named ``prefix...`` with whatever runs in it (dnsmasq) and every
    device in it (bridge, taps, veths). One namespace that will not go does not keep the
    others."""
    try:
        yield
    finally:
        if directory is not None:
            netns.kill(working_in(directory))
        failed = []
        for name in netns.names(prefix):
            try:
                netns.delete(name)
            except DriverError as exc:
                failed.append(str(exc))
        assert not failed, failed


def working_in(directory: Path) -> list[int]:
    """The processes (not zombies) whose working directory is ``directory`` or below it."""
    top = directory.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "cwd").resolve().is_relative_to(top) and alive(int(entry.name)):
                found.append(int(entry.name))
        except (OSError, RuntimeError):
            continue  # gone meanwhile
    return found


# -- frames a misbehaving guest sends ----------------------------------------------------------


def mac_bytes(mac: str) -> bytes:
    return bytes(int(part, 16) for part in mac.split(":"))


def arp_reply(*, sender_mac: str, sender_ip: str, target_mac: str, target_ip: str) -> bytes:
    """An Ethernet frame with an ARP reply: "``sender_ip`` is at ``sender_mac``"."""
    ether = mac_bytes(target_mac) + mac_bytes(sender_mac) + struct.pack("!H", 0x0806)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2)
    arp += mac_bytes(sender_mac) + socket.inet_aton(sender_ip)
    arp += mac_bytes(target_mac) + socket.inet_aton(target_ip)
    return ether + arp


def neighbour_advert(*, sender_mac: str, source: str, target: str) -> bytes:
    """An Ethernet frame with an unsolicited IPv6 neighbour advertisement (override set) sent
    to all nodes from ``source``: "``target`` is at ``sender_mac``"."""
    src, dst = (
        socket.inet_pton(socket.AF_INET6, source),
        socket.inet_pton(socket.AF_INET6, "ff02::1"),
    )
    body = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + socket.inet_pton(socket.AF_INET6, target)
    body += bytes([2, 1]) + mac_bytes(sender_mac)  # target link-layer address option
    pseudo = src + dst + struct.pack("!I3xB", len(body), 58)
    checksum = _checksum(pseudo + body)
    body = body[:2] + struct.pack("!H", checksum) + body[4:]
    ipv6 = struct.pack("!IHBB", 6 << 28, len(body), 58, 255) + src + dst
    ether = mac_bytes("33:33:00:00:00:01") + mac_bytes(sender_mac) + struct.pack("!H", 0x86DD)
    return ether + ipv6 + body


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def dhcp_discover(mac: str, xid: int) -> bytes:
    """A DHCPDISCOVER (BOOTP with the broadcast flag) for the client ``mac``."""
    packet = struct.pack("!BBBBIHH", 1, 1, 6, 0, xid, 0, 0x8000)
    packet += bytes(16) + mac_bytes(mac) + bytes(10) + bytes(192)
    packet += b"\x63\x82\x53\x63" + bytes([53, 1, 1, 255])
    return packet


def dhcp_offer(request: bytes, *, your_ip: str, server_ip: str) -> bytes:
    """A DHCPOFFER answering ``request`` (a rogue server's, in the tests)."""
    xid, flags = struct.unpack("!I", request[4:8])[0], 0x8000
    packet = struct.pack("!BBBBIHH", 2, 1, 6, 0, xid, 0, flags)
    packet += bytes(4) + socket.inet_aton(your_ip) + socket.inet_aton(server_ip) + bytes(4)
    packet += request[28:44] + bytes(192)
    packet += b"\x63\x82\x53\x63" + bytes([53, 1, 2, 54, 4]) + socket.inet_aton(server_ip)
    return packet + bytes([255])


@dataclass(frozen=True)
class Offer:
    your_ip: str
    server_id: str


def parse_offer(packet: bytes) -> Offer | None:
    if len(packet) < 240 or packet[0] != 2 or packet[236:240] != b"\x63\x82\x53\x63":
        return None
    options, i, server = packet[240:], 0, ""
    while i < len(options) and options[i] != 255:
        if options[i] == 0:
            i += 1
            continue
        code, length = options[i], options[i + 1]
        if code == 54 and length == 4:
            server = socket.inet_ntoa(options[i + 2 : i + 6])
        i += 2 + length
    return Offer(socket.inet_ntoa(packet[16:20]), server)


# -- what is on the wire ------------------------------------------------------------------------


class capture:
    """The TCP segments on ``device`` of ``namespace`` while the block runs, each as (IP TTL
    or IPv6 hop limit, payload)."""

    def __init__(self, namespace: str, device: str) -> None:
        self.namespace = namespace
        self.device = device
        self.frames: list[tuple[int, bytes]] = []
        self._stop = threading.Event()

    def __enter__(self) -> list[tuple[int, bytes]]:
        self.sock = netns.inside(self.namespace, lambda: _packet_socket(self.device))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self.frames

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join(30)
        self.sock.close()

    def _read(self) -> None:
        # Stops only once the socket is drained: on a loaded machine this thread runs behind
        # the block, and the segments already queued are the ones the test looks for.
        while True:
            try:
                frame = self.sock.recv(65536)
            except TimeoutError:
                if self._stop.is_set():
                    return
                continue
            except OSError:
                return
            parsed = _tcp_payload(frame[14:])  # after the Ethernet header (empty on lo)
            if parsed is not None:
                self.frames.append(parsed)


def _packet_socket(device: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    sock.bind((device, 0))
    sock.settimeout(0.05)
    return sock


def _tcp_payload(packet: bytes) -> tuple[int, bytes] | None:
    if not packet:
        return None
    version = packet[0] >> 4
    if version == 4 and packet[9] == 6:
        hops, header = packet[8], (packet[0] & 0x0F) * 4
    elif version == 6 and packet[6] == 6:
        hops, header = packet[7], 40
    else:
        return None
    tcp = packet[header:]
    if len(tcp) < 20:
        return None
    offset = (struct.unpack("!B", tcp[12:13])[0] >> 4) * 4
    return hops, tcp[offset:]
