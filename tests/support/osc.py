"""python-openstackclient (OSC) in a virtualenv of its own, and a cloud for it to talk to.

``openstack_binary()`` creates, once, ``<repo>/.cache/osc-venv`` (tool_venv.py) with
``pip install 'python-openstackclient>=7,<11'`` from PyPI, and reuses it while its
``openstack --version`` works. The venv is built in a scratch directory and renamed into place,
so a half-built one is never seen. When PyPI cannot be reached the caller is told to skip
(``OscUnavailable``) unless ``CLOUDSEED_REQUIRE_DBS=1`` (CI), where that is a failure.

``identity_stub()`` serves only Keystone's v3 version document on a random loopback port, and
``cloud_env()`` writes a clouds.yaml that points OSC at a compute endpoint and at that stub.
Why the stub: every keypair command of OSC calls ``ensure_service_version(identity, '3')``
before it talks to Nova, and with no identity endpoint of its own the identity proxy would run
version discovery against the compute endpoint (``Service requires API version '3' but the
configured version is '2'``). The stub only has to answer that discovery; no token is ever
asked of it (the stub records every request so a test can check).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.support import tool_venv
from tests.support.tool_venv import CACHE_DIR, clean_env

VENV_DIR = CACHE_DIR / "osc-venv"
REQUIREMENT = "python-openstackclient>=7,<11"
INSTALL_TIMEOUT = 900  # seconds; a cold install pulls ~60 wheels
NETWORK_ERRORS = (*tool_venv.NETWORK_ERRORS, "(from versions: none)")  # no index had a version


class OscUnavailable(tool_venv.Unavailable):
    """python-openstackclient could not be installed because the registry is unreachable."""


def required() -> bool:
    return os.environ.get("CLOUDSEED_REQUIRE_DBS") == "1"


def _openstack(venv: Path) -> Path:
    return venv / "bin" / "openstack"


def _works(venv: Path) -> bool:
    binary = _openstack(venv)
    return binary.exists() and tool_venv.answers(venv, binary, "--version", naming="openstack")


def _build(target: Path) -> None:
    scratch = CACHE_DIR / f".osc-venv-build-{uuid.uuid4().hex[:8]}"
    try:
        tool_venv.create(scratch, OscUnavailable)
        tool_venv.pip_install(
            scratch,
            REQUIREMENT,
            timeout=INSTALL_TIMEOUT,
            unavailable=OscUnavailable,
            network_errors=NETWORK_ERRORS,
        )
        if not _works(scratch):
            raise RuntimeError(f"{_openstack(scratch)} --version does not work after install")
        # venv scripts carry the venv path in their shebangs, so the venv is built at a scratch
        # path and only then renamed; rewrite the shebangs (and activate scripts) to the final one.
        _relocate(scratch, target)
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def _relocate(scratch: Path, target: Path) -> None:
    old, new = str(scratch).encode(), str(target).encode()
    for path in (scratch / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))
    cfg = scratch / "pyvenv.cfg"
    cfg.write_bytes(cfg.read_bytes().replace(old, new))


def openstack_binary() -> Path:
    """Path of a working ``openstack`` executable; builds the cached venv when needed.

    Raises ``OscUnavailable`` when PyPI cannot be reached (callers skip, or fail under CI).
    """
    return _openstack(tool_venv.cached(VENV_DIR, _works, _build))


# --- a Keystone stand-in: the v3 version document and project look-ups, nothing else -----------


@dataclass
class IdentityStub:
    url: str
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def token_requests(self) -> list[tuple[str, str, dict[str, str]]]:
        return [r for r in self.requests if r[0] != "GET" or "/auth/tokens" in r[1]]


@contextmanager
def identity_stub() -> Iterator[IdentityStub]:
    """Serve Keystone's v3 version document and project look-ups (any project exists) on
    127.0.0.1 (a random port); record requests."""
    stub = IdentityStub(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _record(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            with lock:
                stub.requests.append((self.command, self.path, dict(self.headers.items())))

        def _send(self, status: int, body: dict[str, object] | None) -> None:
            payload = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def do_GET(self) -> None:
            self._record()
            if self.path.split("?")[0] in ("/", "/v3", "/v3/"):
                self._send(
                    200,
                    {
                        "version": {
                            "id": "v3.14",
                            "status": "stable",
                            "updated": "2020-04-07T00:00:00Z",
                            "links": [{"rel": "self", "href": f"{stub.url}/v3/"}],
                            "media-types": [
                                {
                                    "base": "application/json",
                                    "type": "application/vnd.openstack.identity-v3+json",
                                }
                            ],
                        }
                    },
                )
            elif self.path.startswith("/v3/projects"):
                # Any project exists, named as its id (``openstack quota show <project>``
                # resolves the name here first).
                path, _, query = self.path.partition("?")
                name = path.removeprefix("/v3/projects").strip("/")
                if not name and query.startswith("name="):
                    name = query.removeprefix("name=").split("&")[0]
                project = {"id": name, "name": name, "domain_id": "default", "enabled": True}
                if path.strip("/").count("/") == 2:
                    self._send(200, {"project": project})
                else:
                    self._send(200, {"projects": [project], "links": {}})
            else:
                self._send(
                    404,
                    {
                        "error": {
                            "code": 404,
                            "title": "Not Found",
                            "message": "identity stub: version document only",
                        }
                    },
                )

        def _refuse(self) -> None:
            self._record()
            self._send(
                404,
                {
                    "error": {
                        "code": 404,
                        "title": "Not Found",
                        "message": "identity stub: version document only",
                    }
                },
            )

        do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _refuse

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="identity-stub",
        daemon=True,
    )
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# --- a transparent recording proxy in front of the API -------------------------------------------

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "server",
        "date",
    }
)


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-cased names
    body: bytes
    status: int
    response: bytes = b""

    @property
    def microversion(self) -> str | None:
        """The compute version of ``OpenStack-API-Version``, if sent."""
        value = self.headers.get("openstack-api-version", "")
        service, _, version = value.partition(" ")
        return version.strip() if service == "compute" else None


@dataclass
class RecordingProxy:
    url: str
    requests: list[Exchange] = field(default_factory=list)

    def last(self, method: str, path: str) -> Exchange:
        for exchange in reversed(self.requests):
            if exchange.method == method and exchange.path == path:
                return exchange
        seen = [(r.method, r.path) for r in self.requests]
        raise AssertionError(f"no {method} {path} among {seen}")


@contextmanager
def recording_proxy(upstream: str) -> Iterator[RecordingProxy]:
    """Forward every request to ``upstream`` as is, Host header included (so the links the API
    builds point back at the proxy), and record each exchange."""
    recorder = RecordingProxy(url="")
    lock = threading.Lock()
    client = httpx.Client(base_url=upstream, timeout=60)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            with lock:
                response = client.request(self.command, self.path, headers=headers, content=body)
                recorder.requests.append(
                    Exchange(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in headers.items()},
                        body,
                        response.status_code,
                        response.content,
                    )
                )
            payload = response.content
            self.send_response(response.status_code)
            for name, value in response.headers.multi_items():
                if name.lower() not in _HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="recording-proxy",
        daemon=True,
    )
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        client.close()


# --- clouds.yaml ---------------------------------------------------------------------------------


def write_clouds_yaml(
    directory: Path, compute_url: str, token: str, identity_url: str, cloud: str = "cloudseed"
) -> Path:
    """Write a clouds.yaml for ``compute_url`` (``…/v2.1``) and return its path.

    ``admin_token`` sends ``X-Auth-Token: <token>`` as is (noauth2's ``user:project``) and asks
    no identity service for a token. ``identity_endpoint_override`` only serves OSC's identity
    version check. JSON is valid YAML, so no YAML library is needed.
    """
    config = {
        "clouds": {
            cloud: {
                "auth_type": "admin_token",
                "auth": {"endpoint": compute_url, "token": token},
                "compute_endpoint_override": compute_url,
                "identity_endpoint_override": f"{identity_url}/v3",
                # cloudseed's Glance slice and read-only Neutron slice, on the compute API's port.
                "image_endpoint_override": compute_url.removesuffix("/v2.1") + "/image",
                "network_endpoint_override": compute_url.removesuffix("/v2.1") + "/network",
                "region_name": "RegionOne",
            }
        }
    }
    path = directory / "clouds.yaml"
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def cloud_env(
    directory: Path, compute_url: str, token: str, identity_url: str, cloud: str = "cloudseed"
) -> dict[str, str]:
    """Environment to run ``openstack`` with: only our clouds.yaml, none of the parent's OS_*."""
    path = write_clouds_yaml(directory, compute_url, token, identity_url, cloud)
    home = directory / "home"
    home.mkdir(exist_ok=True)
    # HOME and XDG_* keep OSC from reading ~/.config/openstack/clouds.yaml or secure.yaml,
    # and from writing its cache anywhere but the scratch directory.
    return clean_env(
        {
            "OS_CLIENT_CONFIG_FILE": str(path),
            "OS_CLOUD": cloud,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
    )
