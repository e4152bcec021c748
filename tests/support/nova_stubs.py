"""Stand-ins for the services a real Nova calls besides its databases: Neutron (ports and
security groups, read from a JSON file the seed writes), Glance (every image exists) and
Placement (no allocations), on one loopback port, without Keystone.

Nova's metadata API asks Neutron for an instance's ports (``device_id``) and their security
groups, and, in direct mode, for the port of a fixed IP (``fixed_ips=ip_address=...``); the
compute API asks Glance for the image on rebuild, Neutron for ports on delete (it unbinds or
deletes them) and Placement to drop allocations on a local delete. Each is answered from
``neutron.json`` (re-read on every request, so a test may edit it) or with a fixed body; every
request is recorded so a test can show which calls Nova made. Nothing here implements those
services' rules: filters are the few Nova uses, and writes are accepted and forgotten.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

IMAGE_FIELDS: dict[str, Any] = {
    "name": "peer-image",
    "status": "active",
    "visibility": "public",
    "disk_format": "qcow2",
    "container_format": "bare",
    "min_disk": 0,
    "min_ram": 0,
    "size": 1,
    "tags": [],
    "protected": False,
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
    "owner": "peer",
    "checksum": None,
    "virtual_size": None,
}


@dataclass
class Stubs:
    url: str  # http://127.0.0.1:<port>
    neutron_file: Path
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path?query)

    @property
    def network_url(self) -> str:
        return f"{self.url}/network"

    @property
    def image_url(self) -> str:
        return f"{self.url}/image"

    @property
    def placement_url(self) -> str:
        return f"{self.url}/placement"


def _matches(item: dict[str, Any], query: dict[str, list[str]]) -> bool:
    for name, wanted in query.items():
        if name == "fields":
            continue
        if name == "fixed_ips":  # Nova asks "ip_address=<address>"
            addresses = {ip["ip_address"] for ip in item.get("fixed_ips", [])}
            for condition in wanted:
                key, _, value = condition.partition("=")
                if key == "ip_address" and value not in addresses:
                    return False
            continue
        if str(item.get(name)) not in wanted:
            return False
    return True


def _select(item: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k in fields} if fields else item


def _neutron(stubs: Stubs, method: str, path: str, query: dict[str, list[str]]) -> Any:
    """(status, body) for a Neutron request below /network."""
    if path in ("", "/"):
        return 200, {
            "versions": [
                {
                    "id": "v2.0",
                    "status": "CURRENT",
                    "links": [{"rel": "self", "href": f"{stubs.network_url}/v2.0/"}],
                }
            ]
        }
    parts = path.removeprefix("/v2.0/").removesuffix(".json").strip("/").split("/")
    collection = parts[0].replace("-", "_")
    try:
        document = json.loads(stubs.neutron_file.read_text())
    except (OSError, ValueError):
        document = {}
    items: list[dict[str, Any]] = document.get(collection, [])
    if method == "DELETE":
        return 204, None
    if len(parts) > 1:
        found = [item for item in items if item.get("id") == parts[1]]
        singular = collection.removesuffix("s")
        if not found:
            return 404, {"NeutronError": {"type": "NotFound", "message": path, "detail": ""}}
        return 200, {singular: found[0]}
    fields = query.get("fields", [])
    return 200, {collection: [_select(i, fields) for i in items if _matches(i, query)]}


def _glance(stubs: Stubs, path: str) -> tuple[int, Any]:
    if path in ("", "/"):
        return 300, {
            "versions": [
                {
                    "id": "v2.16",
                    "status": "CURRENT",
                    "links": [{"rel": "self", "href": f"{stubs.image_url}/v2/"}],
                }
            ]
        }
    if path == "/v2/schemas/image":
        return 200, {
            "name": "image",
            "properties": {
                "id": {"type": "string"},
                "name": {"type": ["null", "string"]},
                "status": {"type": "string"},
            },
            "additionalProperties": {"type": "string"},
        }
    if path.startswith("/v2/images/"):
        return 200, {"id": path.rsplit("/", 1)[1], **IMAGE_FIELDS}
    return 404, {"error": f"not stubbed: {path}"}


def _placement(method: str, path: str) -> tuple[int, Any]:
    if method == "DELETE":
        return 204, None
    if path.startswith("/allocations/"):
        return 200, {"allocations": {}, "consumer_generation": None}
    # Placement's own root document, as keystoneauth's version discovery reads it.
    return 200, {
        "versions": [
            {
                "id": "v1.0",
                "max_version": "1.39",
                "min_version": "1.0",
                "status": "CURRENT",
                "links": [{"rel": "self", "href": ""}],
            }
        ]
    }


def _handler(stubs: Stubs) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            with lock:
                stubs.requests.append((self.command, self.path))
            split = urlsplit(self.path)
            query = parse_qs(split.query)
            path = split.path.rstrip("/") or "/"
            status: int
            body: Any
            if path.startswith("/network"):
                status, body = _neutron(stubs, self.command, path.removeprefix("/network"), query)
            elif path.startswith("/image"):
                status, body = _glance(stubs, path.removeprefix("/image"))
            elif path.startswith("/placement"):
                status, body = _placement(self.command, path.removeprefix("/placement"))
            else:
                status, body = 404, {"error": f"not stubbed: {path}"}
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

    return Handler


@contextmanager
def running_stubs(neutron_file: Path) -> Iterator[Stubs]:
    """Serve the stand-ins on a kernel-chosen loopback port in a thread of this process."""
    stubs = Stubs(url="", neutron_file=neutron_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stubs))
    server.daemon_threads = True
    stubs.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="nova-stubs", daemon=True)
    thread.start()
    try:
        yield stubs
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
