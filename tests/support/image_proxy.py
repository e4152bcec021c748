"""A real HTTP proxy on a loopback port in front of the compute API's Glance slice, for the
image cache's tests: it forwards each ``GET`` as it came (``Range`` included) and can spoil
the answers it passes back the way a network or a bad store would.

``faults`` is the plan for the next answers, one entry each, in order (an empty plan passes
answers through untouched): ``Corrupt()`` flips one byte of the body, ``Cut(after)`` sends
``after`` bytes of the body and closes the connection (the client sees a body shorter than
its Content-Length), ``Extra(data)`` appends bytes the API never sent. ``pace`` slows every
answer to one piece per ``pace`` seconds, so that concurrent clients overlap for certain.
``seen`` records every request (path, Range header, status, body bytes passed on).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

PASSED_HEADERS = ("content-type", "content-length", "content-range", "content-md5")
PIECE = 64 * 1024


@dataclass(frozen=True)
class Corrupt:
    at: int = 10


@dataclass(frozen=True)
class Cut:
    after: int


@dataclass(frozen=True)
class Extra:
    data: bytes = b"\0"


Fault = Corrupt | Cut | Extra


@dataclass
class Seen:
    path: str
    range: str | None
    status: int = 0
    sent: int = 0


@dataclass
class ImageProxy:
    upstream: str
    url: str = ""
    faults: list[Fault] = field(default_factory=list)
    pace: float = 0.0
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def file_requests(self) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.path.endswith("/file")]

    def _next_fault(self) -> Fault | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None


@contextmanager
def image_proxy(upstream: str) -> Iterator[ImageProxy]:
    """A proxy for the server at ``upstream`` (``http://127.0.0.1:PORT``); its ``url`` is the
    image endpoint to give an image cache (``http://127.0.0.1:ITS-PORT/image``)."""
    proxy = ImageProxy(upstream=upstream.rstrip("/"))
    client = httpx.Client(timeout=60)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen = Seen(path=self.path, range=self.headers.get("Range"))
            with proxy.lock:
                proxy.seen.append(seen)
            headers = {
                k: v
                for k, v in self.headers.items()
                if k.lower() in ("x-auth-token", "range", "accept")
            }
            fault = proxy._next_fault()
            with client.stream("GET", proxy.upstream + self.path, headers=headers) as answer:
                seen.status = answer.status_code
                self.send_response(answer.status_code)
                for name in PASSED_HEADERS:
                    if name in answer.headers:
                        value = answer.headers[name]
                        if name == "content-length" and isinstance(fault, Extra):
                            value = str(int(value) + len(fault.data))
                        self.send_header(name, value)
                self.end_headers()
                for piece in answer.iter_bytes(PIECE):
                    if proxy.pace:
                        time.sleep(proxy.pace)  # the simulated network's speed
                    if isinstance(fault, Corrupt) and seen.sent <= fault.at < seen.sent + len(
                        piece
                    ):
                        i = fault.at - seen.sent
                        piece = piece[:i] + bytes([piece[i] ^ 0xFF]) + piece[i + 1 :]
                    if isinstance(fault, Cut) and seen.sent + len(piece) > fault.after:
                        piece = piece[: fault.after - seen.sent]
                        self.wfile.write(piece)
                        seen.sent += len(piece)
                        self.close_connection = True
                        return
                    self.wfile.write(piece)
                    seen.sent += len(piece)
                if isinstance(fault, Extra):
                    self.wfile.write(fault.data)
                    seen.sent += len(fault.data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}/image"
    thread = threading.Thread(target=server.serve_forever, name="image-proxy", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        client.close()
