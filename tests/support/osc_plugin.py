"""python-openstackclient with cloudseed's plugin (clients/osc-plugin) in a venv of its own,
and a small compute API that does not support updating user data.

``openstack_with_plugin()`` keeps ``<repo>/.cache/osc-plugin-venv`` (git-ignored) with
``python-openstackclient`` (the requirement of tests/support/osc.py) and ``cloudseed-osc``
installed from a copy of ``clients/osc-plugin``. A stamp file records what it was built from:

* the OSC requirement and the plugin's ``pyproject.toml`` (its dependencies and entry points):
  when either changes, the venv is built again from scratch;
* a digest of every plugin source file: when only that changes, the plugin alone is
  reinstalled (``--no-deps``: its dependencies are unchanged and already there), so an edit to
  the plugin is picked up by the next test run in a few seconds.

Not tests/support/osc.py's venv: the tests that drive the stock client keep a stock client.
The stamp is written last, so a half-built venv is never taken for a good one; concurrent
callers (pytest-xdist workers) serialise on a lock file. A registry that cannot be reached is
reported as ``osc.OscUnavailable``, like osc.py does, for the caller to skip (or fail in CI).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support import osc, tool_venv
from tests.support.osc import NETWORK_ERRORS  # one list, shared with osc.py

PLUGIN_DIR = tool_venv.REPO_ROOT / "clients" / "osc-plugin"
VENV_DIR = tool_venv.CACHE_DIR / "osc-plugin-venv"
STAMP_NAME = "cloudseed-osc-stamp.json"
# Build outputs and caches inside the plugin's tree: not sources, and not copied.
_NOT_SOURCES = ("build", "dist", "__pycache__", "*.egg-info", "*.pyc", ".ruff_cache", ".mypy_cache")


def _plugin_files() -> list[Path]:
    ignored = shutil.ignore_patterns(*_NOT_SOURCES)
    files: list[Path] = []
    for top, subdirs, names in os.walk(PLUGIN_DIR):
        dropped = ignored(top, [*subdirs, *names])
        subdirs[:] = sorted(d for d in subdirs if d not in dropped)
        files.extend(Path(top) / n for n in sorted(names) if n not in dropped)
    return files


def wanted_stamp() -> dict[str, str]:
    sources = hashlib.sha256()
    for path in _plugin_files():
        sources.update(str(path.relative_to(PLUGIN_DIR)).encode() + b"\0")
        sources.update(path.read_bytes() + b"\0")
    pyproject = hashlib.sha256((PLUGIN_DIR / "pyproject.toml").read_bytes()).hexdigest()
    return {"requirement": osc.REQUIREMENT, "pyproject": pyproject, "sources": sources.hexdigest()}


def _stamp(venv: Path) -> dict[str, str] | None:
    try:
        stamp: dict[str, str] = json.loads((venv / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    return stamp


def _openstack(venv: Path) -> Path:
    return venv / "bin" / "openstack"


def _pip_install(venv: Path, *args: str) -> None:
    tool_venv.pip_install(
        venv,
        *args,
        timeout=osc.INSTALL_TIMEOUT,
        unavailable=osc.OscUnavailable,
        network_errors=NETWORK_ERRORS,
    )


def _install(venv: Path, have: dict[str, str] | None, want: dict[str, str]) -> None:
    # A copy, so that pip's in-tree build leaves no build/ or *.egg-info in the repository,
    # and two builds never share a build directory.
    with tempfile.TemporaryDirectory(prefix="cloudseed-osc-") as scratch:
        source = Path(scratch) / "osc-plugin"
        shutil.copytree(PLUGIN_DIR, source, ignore=shutil.ignore_patterns(*_NOT_SOURCES))
        same_base = (
            have is not None
            and _openstack(venv).exists()
            and (have["requirement"], have["pyproject"]) == (want["requirement"], want["pyproject"])
        )
        if same_base:
            _pip_install(venv, "--no-deps", "--force-reinstall", str(source))
            return
        if venv.exists():
            shutil.rmtree(venv)
        tool_venv.create(venv, osc.OscUnavailable)
        _pip_install(venv, osc.REQUIREMENT, str(source))


def openstack_with_plugin() -> Path:
    """Path of an ``openstack`` executable that loads the current cloudseed-osc."""
    want = wanted_stamp()
    if _stamp(VENV_DIR) == want:
        return _openstack(VENV_DIR)
    with tool_venv.locked(VENV_DIR.name):  # another worker may be building it right now
        have = _stamp(VENV_DIR)
        if have != want:
            (VENV_DIR / STAMP_NAME).unlink(missing_ok=True)
            _install(VENV_DIR, have, want)
            (VENV_DIR / STAMP_NAME).write_text(json.dumps(want, indent=2) + "\n")
    return _openstack(VENV_DIR)


# --- a compute API without microversion 2.105 ---------------------------------------------------

SERVER_ID = "8f1bb9d0-5a1e-4d43-9a47-7a1c6f0f0c11"


@dataclass
class OlderCompute:
    url: str
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)

    def changes(self) -> list[tuple[str, str, str | None]]:
        """Every request that is not a GET: what would have changed the server."""
        return [r for r in self.requests if r[0] != "GET"]


@contextmanager
def older_compute(*, advertised: str, accepted: str) -> Iterator[OlderCompute]:
    """A compute API on 127.0.0.1 that advertises ``advertised`` as its newest microversion and
    answers 406 (as Nova does) to any request above ``accepted``. It knows one ACTIVE server,
    ``SERVER_ID``, and records ``(method, path, microversion)`` of every request.

    ``advertised == accepted`` is a real Nova (or an older cloudseed); ``advertised`` above
    ``accepted`` is a cloud whose version document cannot be trusted, as during an upgrade.
    """
    compute = OlderCompute(url="")
    lock = threading.Lock()
    newest_accepted = _version_tuple(accepted)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, body: object) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            header = self.headers.get("OpenStack-API-Version", "")
            version = header.removeprefix("compute ").strip() or None
            with lock:
                compute.requests.append((self.command, self.path, version))
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v2.1":
                self._send(
                    200,
                    {
                        "version": {
                            "id": "v2.1",
                            "status": "CURRENT",
                            "version": advertised,
                            "min_version": "2.1",
                            "updated": "2013-07-23T11:33:21Z",
                            "links": [{"rel": "self", "href": f"{compute.url}/v2.1/"}],
                        }
                    },
                )
            elif version and _version_tuple(version) > newest_accepted:
                self._send(
                    406,
                    {
                        "computeFault": {
                            "code": 406,
                            "message": (
                                f"Version {version} is not supported by the API. "
                                f"Minimum is 2.1 and maximum is {accepted}."
                            ),
                        }
                    },
                )
            elif self.command == "GET" and path == f"/v2.1/servers/{SERVER_ID}":
                self._send(
                    200,
                    {
                        "server": {
                            "id": SERVER_ID,
                            "name": "vm",
                            "status": "ACTIVE",
                            "config_drive": "",
                        }
                    },
                )
            else:
                self._send(404, {"itemNotFound": {"code": 404, "message": "Not found"}})

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    compute.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.05},
        name="older-compute",
        daemon=True,
    )
    thread.start()
    try:
        yield compute
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


# Only SQLite, as the other CLI tests: each `openstack` run costs 1.5-3 s of start-up, and the
# API's behaviour on every backend is covered by tests/functional. (Per test, not per module:
# the test against a fake compute API uses no database.)
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


OSC_VERSION = "2.100"  # what OSC negotiates for server commands against cloudseed's 2.105


def no_traceback(result: Any) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def openstack_or_skip() -> Path:
    """``openstack_with_plugin()``, or the test skips (fails under CLOUDSEED_REQUIRE_DBS=1)
    when it cannot be installed here."""
    try:
        return openstack_with_plugin()
    except osc.OscUnavailable as exc:
        if osc.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but OSC with cloudseed-osc is unavailable: {exc}")
        pytest.skip(f"python-openstackclient cannot be installed here: {exc}")
