"""The metadata proxy of one bridged network, as OVN's metadata agent runs one per network: it
listens inside the network's namespace (on 169.254.169.254:80, [fe80::a9fe:a9fe]:80 and, when
the network enables it, [fd00:ec2::254]:80), takes each caller for the port whose address it
comes from, and forwards the request to cloudseed's metadata service with that port's
instance signed into the headers, exactly as the slirp relay does (``guestfwd_relay.py``:
``X-Instance-ID``, ``X-Tenant-ID``, ``X-Instance-ID-Signature``; what the guest sent under
those names, or as ``X-Forwarded-For``/``Forwarded``, is dropped). ``X-Forwarded-For`` carries
the caller's address (the service's ``local-ipv4`` for an IPv4 caller).

    python -m cloudseed.compute.metadata_proxy CONFIG

run by the qemu driver (``bridge_networks.py``) in the network's directory, in the host's own
network namespace: the listening sockets are made by the driver inside the network's namespace
and inherited (``listen_fds`` in CONFIG), so accepted connections are the namespace's while
the connections upstream are the host's. CONFIG also names ``upstream`` (host, port) and
``ports``, the port map (``bridge_plan.proxy_ports``), read again whenever it changes.

Who is who rests on the bridge's port security (``bridge_plan.ruleset``): a tap can only send
from its port's MAC, fixed IPs and EUI-64 link-local address, so a source address names one
port. A source that is no port's gets 404 and nothing is forwarded. No caller may hold more
than ``PER_CALLER`` connections at once (past that: 503 at once), so one guest flooding the
proxy leaves room for the others (``MAX_CONNECTIONS`` in all).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cloudseed.compute.errors import BadRelayRequest
from cloudseed.compute.guestfwd_relay import MAX_HEAD, TIMEOUT, rewrite

log = logging.getLogger("cloudseed.metadata_proxy")

PER_CALLER = 8
MAX_CONNECTIONS = 256
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass
class PortMap:
    """``ports.json``, read again when its file changes (the driver replaces it whole)."""

    path: Path
    _stamp: tuple[int, int, int] | None = None
    _sources: dict[str, list[tuple[bytes, bytes]]] = field(default_factory=dict)

    def identity(self, address: str) -> list[tuple[bytes, bytes]] | None:
        """The signed headers for a caller at ``address``, None for no port's address."""
        self._refresh()
        return self._sources.get(address)

    def _refresh(self) -> None:
        try:
            found = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._sources = None, {}
            return
        stamp = (found.st_ino, found.st_size, found.st_mtime_ns)
        if stamp == self._stamp:
            return
        data = json.loads(self.path.read_bytes())
        self._sources = {
            address: [(n.encode("latin-1"), v.encode("latin-1")) for n, v in entry["headers"]]
            for address, entry in data["sources"].items()
        }
        self._stamp = stamp


def caller_address(peer: object) -> str | None:
    """The caller's address as the port map writes it: normalised, without an IPv6 zone."""
    if not isinstance(peer, tuple) or not peer or not isinstance(peer[0], str):
        return None
    try:
        address = ipaddress.ip_address(peer[0].partition("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


class Proxy:
    def __init__(self, ports: PortMap, upstream: tuple[str, int]) -> None:
        self.ports = ports
        self.upstream = upstream
        self.open: dict[str, int] = {}
        self.total = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = caller_address(writer.get_extra_info("peername"))
        try:
            if address is None:
                return
            if self.open.get(address, 0) >= PER_CALLER or self.total >= MAX_CONNECTIONS:
                writer.write(BUSY)
                return
            self.open[address] = self.open.get(address, 0) + 1
            self.total += 1
            try:
                await self._serve(address, reader, writer)
            finally:
                self.total -= 1
                self.open[address] -= 1
                if not self.open[address]:
                    del self.open[address]
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            pass  # the caller went away or stopped talking
        finally:
            with contextlib.suppress(OSError):
                await asyncio.wait_for(writer.drain(), TIMEOUT)
            writer.close()

    async def _serve(
        self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        identity = self.ports.identity(address)
        if identity is None:
            log.info("refused %s: no port of this network has that address", address)
            writer.write(NOT_FOUND)
            return
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
            upstream_head, length = rewrite(
                head, [*identity, (b"X-Forwarded-For", address.encode())]
            )
            body = await asyncio.wait_for(reader.readexactly(length), TIMEOUT) if length else b""
        except (BadRelayRequest, asyncio.LimitOverrunError, ValueError):
            writer.write(BAD_REQUEST)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), TIMEOUT
            )
        except (TimeoutError, OSError):
            writer.write(BAD_GATEWAY)
            return
        try:
            up_writer.write(upstream_head + body)
            await asyncio.wait_for(up_writer.drain(), TIMEOUT)
            while chunk := await asyncio.wait_for(up_reader.read(65536), TIMEOUT):
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), TIMEOUT)
        finally:
            up_writer.close()


async def serve(config: dict[str, object]) -> None:
    ports = PortMap(Path(str(config["ports"])))
    upstream_value = config["upstream"]
    assert isinstance(upstream_value, list)
    proxy = Proxy(ports, (str(upstream_value[0]), int(upstream_value[1])))
    fds = config["listen_fds"]
    assert isinstance(fds, list)
    servers = []
    for fd in fds:
        sock = socket.socket(fileno=int(fd))
        servers.append(await asyncio.start_server(proxy.handle, sock=sock, limit=MAX_HEAD))
    log.info("metadata proxy serving %d listeners, upstream %s", len(servers), upstream_value)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    with open(argv[1], "rb") as fh:
        config = json.load(fh)
    os.umask(0o077)
    try:
        asyncio.run(serve(config))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
