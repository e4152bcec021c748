"""The metadata proxy of one guest: one HTTP request from the guest, forwarded to cloudseed's
metadata service with the guest's identity signed the way Neutron's metadata proxy does.

QEMU's user-mode network runs this once for every connection the guest opens to
169.254.169.254:80 (``guestfwd=...-cmd:``), with the guest's connection on standard input and
output. It is run by path with the interpreter alone, not imported: it uses the standard library
only, so each connection costs one interpreter start-up and nothing of cloudseed.

    python3 guestfwd_relay.py CONFIG

CONFIG (JSON, mode 0600, written by the qemu driver) holds ``upstream`` (host, port) and
``headers``, the identity: ``X-Instance-ID``, ``X-Tenant-ID`` and ``X-Instance-ID-Signature``
(hex HMAC-SHA256 of the instance id with ``[neutron] metadata_proxy_shared_secret``). The
signature stays in that file rather than on the command line, which every local user can read.

Whatever the guest sent under an identity header (or X-Forwarded-For, Forwarded, the provider
headers) is dropped before the signed ones are added, so a guest can never speak for another.
The request goes upstream with ``Connection: close`` and the answer comes back byte for byte;
the guest's client then sees the close and opens a new connection (a new relay) for its next
request.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import BinaryIO

from cloudseed.compute.errors import BadRelayRequest

# Headers only the proxy may set, and hop-by-hop headers, which end at the proxy.
DROPPED = frozenset(
    {
        b"x-instance-id",
        b"x-tenant-id",
        b"x-instance-id-signature",
        b"x-forwarded-for",
        b"forwarded",
        b"x-metadata-provider",
        b"x-metadata-provider-signature",
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
        b"content-length",
        b"transfer-encoding",
    }
)
MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024  # a posted password is 256 bytes; nothing the guest sends is large
TIMEOUT = 30.0  # seconds for any one read, from either side
BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def read_head(stream: BinaryIO) -> bytes:
    """The request line and headers, up to and including the blank line."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = stream.readline(MAX_HEAD + 1)
        if not line:
            raise BadRelayRequest("connection closed before the request was complete")
        head += line
        if len(head) > MAX_HEAD:
            raise BadRelayRequest("request head too large")
        if head == b"\r\n":  # tolerate a stray empty line before the request, as HTTP does
            head = b""
    return head


def rewrite(head: bytes, identity: list[tuple[bytes, bytes]]) -> tuple[bytes, int]:
    """The request head as it goes upstream, and the length of the body that follows."""
    first, *lines = head[:-4].split(b"\r\n")
    if len(first.split(b" ")) != 3:
        raise BadRelayRequest("malformed request line")
    kept: list[bytes] = []
    length = 0
    for line in lines:
        name, colon, value = line.partition(b":")
        key = name.strip().lower()
        if not colon or not key or key != name.lower():  # no "Name :" tricks either
            raise BadRelayRequest("malformed header line")
        if key == b"transfer-encoding":
            raise BadRelayRequest("chunked request bodies are not relayed")
        if key == b"content-length":
            if not value.strip().isdigit() or int(value) > MAX_BODY:
                raise BadRelayRequest("bad Content-Length")
            length = int(value)
        if key not in DROPPED:
            kept.append(line)
    kept += [name + b": " + value for name, value in identity]
    kept += [b"Content-Length: " + str(length).encode(), b"Connection: close"]
    return b"\r\n".join([first, *kept]) + b"\r\n\r\n", length


def relay(
    guest_in: BinaryIO,
    guest_out: BinaryIO,
    upstream: tuple[str, int],
    identity: list[tuple[bytes, bytes]],
) -> None:
    try:
        head, length = rewrite(read_head(guest_in), identity)
        body = guest_in.read(length) if length else b""
        if len(body) != length:
            raise BadRelayRequest("body shorter than its Content-Length")
    except BadRelayRequest:
        guest_out.write(BAD_REQUEST)
        guest_out.flush()
        return
    try:
        server = socket.create_connection(upstream, timeout=TIMEOUT)
    except OSError:
        guest_out.write(BAD_GATEWAY)
        guest_out.flush()
        return
    with server:
        server.sendall(head + body)
        while chunk := server.recv(65536):
            guest_out.write(chunk)
        guest_out.flush()


def main(argv: list[str]) -> int:
    # QEMU starts us with its signal mask, which blocks SIGTERM; a relay that outlived its
    # guest could then not be stopped. And a guest that stops talking must not keep us.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(int(TIMEOUT * 2))
    # slirp gives us the guest's socket as standard error too: a traceback is not for the guest.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    with open(argv[1], "rb") as fh:
        config = json.load(fh)
    identity = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in config["headers"]
    ]
    upstream = (config["upstream"][0], int(config["upstream"][1]))
    guest_in = os.fdopen(sys.stdin.fileno(), "rb", buffering=65536, closefd=False)
    guest_out = os.fdopen(sys.stdout.fileno(), "wb", buffering=65536, closefd=False)
    try:
        relay(guest_in, guest_out, upstream, identity)
    except OSError:
        return 1  # either side went away; the guest retries
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
