"""A real Nova 34 (from PyPI) with its compute API and metadata API on loopback ports, seeded
with the instance shapes of the nova-metadata drop-in proof, on SQLite, PostgreSQL or MariaDB.

``nova_venv()`` creates, once, ``<repo>/.cache/nova-venv`` (git-ignored) with ``pip install
nova==34.0.0 gunicorn PyMySQL psycopg2-binary`` (a cold install here takes ~40 s) and reuses it
while its marker names the same requirements and ``nova-manage --version`` works. Concurrent
callers serialise on a lock file. When PyPI cannot be reached the caller is told to skip
(``NovaUnavailable``) unless ``CLOUDSEED_REQUIRE_DBS=1`` (CI), where that is a failure.

``running_nova(directory, backend)`` then deploys Nova in ``directory``:

- databases: SQLite files in ``directory``, or four fresh databases (API, cell0, cell1, cell2)
  on the machine's PostgreSQL or MariaDB (tests/support/databases.py makes and drops them);
  there, cell1's mapping is stored as a template (``{scheme}://{username}@{hostname}:{port}/
  <name>``) that Nova fills from ``[database] connection``, as deployments do, and cell2's as
  a plain URL;
- ``nova.conf``: ``transport_url = fake:/`` (no message bus: RPC casts go nowhere, the API's
  database writes happen), the metadata API in Neutron-proxy mode with a shared secret and
  ``[api] metadata_cache_expiration`` as asked (the test uses 0 so that Nova serves fresh data
  to compare with), and ``[neutron]``/``[placement]`` with keystoneauth's ``auth_type = none``
  and an ``endpoint_override`` to the stand-ins of tests/support/nova_stubs.py (``[glance]
  api_servers``): no Keystone anywhere;
- the schemas and cells (what ``nova-manage api_db sync``, ``cell_v2 map_cell0``, ``cell_v2
  create_cell`` for cell1 and cell2 and ``db sync`` do, through the same Nova calls), then the
  seed, in one run of tests/support/nova_seed.py by the Nova venv's interpreter (Nova's own
  objects write every row; one import of Nova instead of eight), and the stand-ins'
  ``neutron.json``;
- gunicorn serving ``nova.wsgi.metadata:application`` and ``nova.wsgi.osapi_compute:
  application``, one sync worker each. Nova's WSGI entry points parse ``sys.argv`` with
  oslo.config, so gunicorn gets no arguments: it reads ``gunicorn.conf.py`` from its working
  directory and Nova finds its files through ``OS_NOVA_CONFIG_DIR``/``OS_NOVA_CONFIG_FILES``.
  The compute API runs our own ``api-paste.ini`` pipeline without ``authtoken``: Nova's
  ``keystonecontext`` filter then trusts ``X-User-Id``/``X-Project-Id``/``X-Roles`` as sent
  (``Nova.compute_client()`` sends an admin's).

``python -m tests.support.nova_peer up DIR [--backend sqlite]`` does the same from a shell and
prints what a developer needs (nova.conf, the URLs, the secret, the shapes), until Ctrl-C.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from tests.support import databases, tool_venv
from tests.support.metadata_crawl import Page, http_crawl
from tests.support.nova_stubs import Stubs, running_stubs
from tests.support.ports import free_port
from tests.support.tool_venv import CACHE_DIR, clean_env
from tests.support.waiting import wait_until

VENV_DIR = CACHE_DIR / "nova-venv"
REQUIREMENTS = (
    "nova==34.0.0",
    "gunicorn>=22,<28",
    "PyMySQL>=1.1,<2",
    "psycopg2-binary>=2.9,<3",
)
INSTALL_TIMEOUT = 900  # seconds; a cold install here takes ~40 s (~200 wheels)
SEED_TIMEOUT = 300  # schemas, cells and seed, on a slow machine with both cores busy
START_TIMEOUT = 120
START_ATTEMPTS = 3
SEED_SCRIPT = Path(__file__).with_name("nova_seed.py")
SECRET = "nova-peer-metadata-secret"
# The microversion of every compute API call Nova.compute_client() makes: 2.90 lets a server
# update change its hostname, and it includes 2.57 (rebuild with key_name and user_data).
COMPUTE_MICROVERSION = "2.90"

Report = Callable[[str], None]


class NovaUnavailable(tool_venv.Unavailable):
    """Nova could not be installed because the package registry is unreachable."""


def required() -> bool:
    """Under CI (``CLOUDSEED_REQUIRE_DBS=1``) a Nova that cannot be had is a failure."""
    return os.environ.get("CLOUDSEED_REQUIRE_DBS") == "1"


def _stderr_report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- the venv ------------------------------------------------------------------------------------


def _bin(venv: Path, name: str) -> Path:
    return venv / "bin" / name


def _works(venv: Path) -> bool:
    if not tool_venv.has_marker(venv, REQUIREMENTS):
        return False
    if not _bin(venv, "gunicorn").exists():
        return False
    return tool_venv.answers(venv, _bin(venv, "nova-manage"), "--version")


def _build(venv: Path, report: Report) -> None:
    started = time.monotonic()
    tool_venv.build(
        venv,
        REQUIREMENTS,
        timeout=INSTALL_TIMEOUT,
        unavailable=NovaUnavailable,
        network_errors=(
            *tool_venv.NETWORK_ERRORS,
            "No matching distribution found for nova",
            "No matching distribution found for gunicorn",
        ),
    )
    if not _works(venv):
        raise RuntimeError(f"{_bin(venv, 'nova-manage')} --version does not work after install")
    report(f"nova: venv built in {time.monotonic() - started:.1f} s")


def nova_venv(report: Report = _stderr_report) -> Path:
    """The cached venv with Nova 34 and gunicorn; builds it when needed (``NovaUnavailable``
    when PyPI cannot be reached)."""
    return tool_venv.cached(VENV_DIR, _works, lambda venv: _build(venv, report))


# --- a deployment --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """One seeded instance, as nova_seed.py describes it."""

    name: str
    uuid: str
    address: str | None  # its first fixed IPv4 address
    keys: tuple[str, ...]
    deleted: bool
    facts: dict[str, Any]


@dataclass
class Nova:
    backend: str
    directory: Path
    conf: Path
    metadata_url: str  # http://127.0.0.1:<port>
    compute_url: str  # http://127.0.0.1:<port>/v2.1
    secret: str
    project_id: str
    user_id: str
    shapes: dict[str, Shape]
    keypairs: dict[str, dict[str, str]]
    stubs: Stubs
    venv: Path
    database_urls: dict[str, str]  # api, cell0, cell1 as Nova's venv connects to them
    timings: list[str] = field(default_factory=list)

    def metadata_headers(self, instance_uuid: str, address: str = "10.0.0.5") -> dict[str, str]:
        """The headers Neutron's metadata proxy sends for ``instance_uuid``."""
        return proxy_headers(self.secret, instance_uuid, self.project_id, address)

    def metadata_get(self, instance_uuid: str, path: str) -> httpx.Response:
        return httpx.get(
            self.metadata_url + path, headers=self.metadata_headers(instance_uuid), timeout=30
        )

    def compute_client(self, microversion: str = COMPUTE_MICROVERSION) -> httpx.Client:
        """A client of Nova's compute API as an admin of the seeded project (the headers that
        keystonemiddleware would have set; our pipeline has no authtoken filter)."""
        return httpx.Client(
            base_url=self.compute_url,
            headers={
                "X-User-Id": self.user_id,
                "X-Project-Id": self.project_id,
                "X-Roles": "admin,member,reader",
                # Nobody checks it, but Nova's clients of Glance and Neutron refuse to send a
                # request without a token (keystoneauth: "No valid authentication").
                "X-Auth-Token": "nova-peer-token",
                "OpenStack-API-Version": f"compute {microversion}",
            },
            timeout=60,
        )

    @contextmanager
    def snapshot(self, overlay: str = "") -> Iterator[str]:
        """Nova's metadata API in a new process of its own, with ``metadata_cache_expiration``
        at an hour (``snapshot.conf`` over nova.conf): the first request for an instance reads
        it from the databases, every later one is answered from that reading. A crawl through
        it is thus Nova's view of the databases as they are when the crawl starts, at the cost
        of one database read per instance: through the uncached metadata API every request
        reads the instance again (~110 ms each here, 35 s for one instance's ~300 paths).
        ``overlay`` (more configuration) is added to snapshot.conf."""
        (self.directory / "snapshot.conf").write_text(
            f"[api]\nmetadata_cache_expiration = 3600\n{overlay}"
        )
        with _serving(
            self.venv,
            self.directory,
            "metadata-snapshot",
            METADATA_APP,
            "/",
            self.timings.append,
            config_files=f"{BASE_FILES};snapshot.conf",
        ) as url:
            yield url

    def crawl(self, shape: Shape, base_url: str | None = None) -> dict[str, Page]:
        """Every path of both trees as ``shape`` sees them through Nova's metadata API at
        ``base_url`` (default: the uncached one; a snapshot's is much faster)."""
        return http_crawl(base_url or self.metadata_url, self.metadata_headers(shape.uuid))

    def logs(self) -> str:
        return "\n".join(
            f"--- {name} (tail) ---\n{_tail(self.directory / name)}"
            for name in ("metadata.log", "metadata-snapshot.log", "osapi.log", "nova.log")
        )


def proxy_headers(
    secret: str, instance_uuid: str, project_id: str, address: str = "10.0.0.5"
) -> dict[str, str]:
    """Neutron's metadata proxy headers: the instance, its project, the guest's address and
    the HMAC-SHA256 of the instance id under the shared secret, in hex."""
    signature = hmac.new(secret.encode(), instance_uuid.encode(), hashlib.sha256).hexdigest()
    return {
        "X-Instance-ID": instance_uuid,
        "X-Tenant-ID": project_id,
        "X-Instance-ID-Signature": signature,
        "X-Forwarded-For": address,
    }


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextmanager
def _timed(report: Report, what: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        report(f"nova: {what}: {time.monotonic() - started:.1f} s")


# Nova's venv has psycopg2 and PyMySQL; the suite's admin URLs name psycopg (3), and SQLAlchemy
# 2.1 (in Nova's venv) takes a bare postgresql:// to mean psycopg (3) too.
_NOVA_DRIVERS = {"postgresql": "postgresql+psycopg2", "mariadb": "mysql+pymysql"}


def _nova_url(suite_url: str, backend: str) -> str:
    url = make_url(suite_url).set(drivername=_NOVA_DRIVERS[backend])
    return url.render_as_string(hide_password=False)


CELLS = ("api", "cell0", "cell1", "cell2")


@contextmanager
def _databases(backend: str, directory: Path) -> Iterator[dict[str, str]]:
    """URLs (Nova's drivers) of four empty databases: api, cell0, cell1, cell2; dropped afterwards.
    ``databases.Unavailable`` when the backend's server does not answer."""
    if backend == "sqlite":
        yield {name: f"sqlite:///{directory / f'nova_{name}.sqlite'}" for name in CELLS}
        return
    with ExitStack() as stack:
        yield {
            name: _nova_url(
                stack.enter_context(databases.scratch_database(backend, str(directory))), backend
            )
            for name in CELLS
        }


def _cell1_mapping_url(backend: str, cell1: str) -> str:
    """What ``create_cell`` stores for cell1: on the database servers a template Nova fills
    from ``[database] connection`` (only the database name is literal), on SQLite the URL."""
    if backend == "sqlite":
        return cell1
    return "{scheme}://{username}@{hostname}:{port}/" + str(make_url(cell1).database)


def _api_paste(directory: Path) -> Path:
    """Nova's own pipelines, with the compute API's ``authtoken`` filter left out."""
    paste = directory / "api-paste.ini"
    paste.write_text("""\
[composite:metadata]
use = egg:Paste#urlmap
/: meta

[pipeline:meta]
pipeline = cors http_proxy_to_wsgi metaapp

[app:metaapp]
paste.app_factory = nova.api.metadata.handler:MetadataRequestHandler.factory

[composite:osapi_compute]
use = call:nova.api.openstack.urlmap:urlmap_factory
/: oscomputeversions
/v2.1: oscomputeversion_v2
/v2.1/+: openstack_compute_api_v21

# No authtoken: keystonecontext builds the request context from X-User-Id, X-Project-Id and
# X-Roles as the client sent them.
[composite:openstack_compute_api_v21]
use = call:nova.api.auth:pipeline_factory_v21
keystone = cors http_proxy_to_wsgi compute_req_id faultwrap request_log sizelimit
    keystonecontext osapi_compute_app_v21

[filter:request_log]
paste.filter_factory = nova.api.openstack.requestlog:RequestLog.factory

[filter:compute_req_id]
paste.filter_factory = nova.api.compute_req_id:ComputeReqIdMiddleware.factory

[filter:faultwrap]
paste.filter_factory = nova.api.openstack:FaultWrapper.factory

[filter:sizelimit]
paste.filter_factory = oslo_middleware:RequestBodySizeLimiter.factory

[filter:http_proxy_to_wsgi]
paste.filter_factory = oslo_middleware.http_proxy_to_wsgi:HTTPProxyToWSGI.factory

[app:osapi_compute_app_v21]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[pipeline:oscomputeversions]
pipeline = cors faultwrap request_log http_proxy_to_wsgi oscomputeversionapp

[pipeline:oscomputeversion_v2]
pipeline = cors compute_req_id faultwrap request_log http_proxy_to_wsgi oscomputeversionapp_v2

[app:oscomputeversionapp]
paste.app_factory = nova.api.openstack.compute.versions:Versions.factory

[app:oscomputeversionapp_v2]
paste.app_factory = nova.api.openstack.compute.versions:VersionsV2.factory

[filter:cors]
paste.filter_factory = oslo_middleware.cors:filter_factory
oslo_config_project = nova

[filter:keystonecontext]
paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory
""")
    return paste


def _write_config(
    directory: Path,
    urls: dict[str, str],
    stubs: Stubs,
    *,
    cache_expiration: int,
    proxy: bool,
    api_conf: str,
    extra: str,
) -> Path:
    conf = directory / "nova.conf"
    conf.write_text(f"""\
[DEFAULT]
transport_url = fake:/
host = peer-api
state_path = {directory}
log_file = {directory / "nova.log"}
use_stderr = false

[api_database]
connection = {urls["api"]}

[database]
connection = {urls["cell1"]}

[api]
metadata_cache_expiration = {cache_expiration}
{api_conf}

[wsgi]
api_paste_config = {directory / "api-paste.ini"}

[oslo_concurrency]
lock_path = {directory / "lock"}

[oslo_messaging_notifications]
driver = noop

[neutron]
service_metadata_proxy = {str(proxy).lower()}
metadata_proxy_shared_secret = {SECRET}
auth_type = none
endpoint_override = {stubs.network_url}

[placement]
auth_type = none
endpoint_override = {stubs.placement_url}

[glance]
api_servers = {stubs.image_url}

[cinder]
auth_type = none
{extra}""")
    return conf


def _cells(directory: Path, backend: str, urls: dict[str, str]) -> Path:
    """nova_seed.py's ``--cells`` file: each cell's transport URL (``fake:/`` with a vhost of
    its own for cell2: Nova wants them apart) and database, in the order nova-manage would map
    them."""
    cells = {
        "cell0": {"transport_url": "none:///", "database_connection": urls["cell0"]},
        "cell1": {
            "transport_url": "fake:/",
            "database_connection": _cell1_mapping_url(backend, urls["cell1"]),
        },
        "cell2": {"transport_url": "fake:/cell2", "database_connection": urls["cell2"]},
    }
    path = directory / "cells.json"
    path.write_text(json.dumps(cells, indent=1))
    return path


def _seed(
    venv: Path, conf: Path, project_id: str, user_id: str, stubs: Stubs, cells: Path
) -> dict[str, Any]:
    result = subprocess.run(
        [
            str(_bin(venv, "python")),
            str(SEED_SCRIPT),
            "--config-file",
            str(conf),
            "--project-id",
            project_id,
            "--user-id",
            user_id,
            "--neutron-file",
            str(stubs.neutron_file),
            "--cells",
            str(cells),
        ],
        capture_output=True,
        text=True,
        timeout=SEED_TIMEOUT,
        env=clean_env(),
        cwd=conf.parent,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"nova_seed.py failed (exit {result.returncode}):\n{result.stderr[-4000:]}\n"
            f"{_tail(conf.parent / 'nova.log')}"
        )
    seeded: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return seeded


def _start_gunicorn(
    venv: Path, directory: Path, name: str, app: str, port: int, config_files: str
) -> subprocess.Popen[bytes]:
    workdir = directory / f"gunicorn-{name}"
    workdir.mkdir(exist_ok=True)
    (workdir / "gunicorn.conf.py").write_text(f"""\
# No command-line arguments: Nova's WSGI entry points parse sys.argv with oslo.config.
wsgi_app = {app!r}
bind = ["127.0.0.1:{port}"]
workers = 1
timeout = 120
graceful_timeout = 3
errorlog = {str(directory / f"{name}.log")!r}
""")
    env = clean_env({"OS_NOVA_CONFIG_DIR": str(directory), "OS_NOVA_CONFIG_FILES": config_files})
    env.pop("GUNICORN_CMD_ARGS", None)
    log = open(directory / f"{name}.out", "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [str(_bin(venv, "gunicorn"))],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    finally:
        log.close()


def _answers(proc: subprocess.Popen[bytes], url: str) -> bool:
    """True once ``url`` answers while ``proc`` lives; False if ``proc`` died."""

    def answered_or_died() -> str | None:
        if proc.poll() is not None:
            return "died"
        try:
            httpx.get(url, timeout=5)
            return "answers"
        except httpx.TransportError:
            return None

    try:
        outcome = wait_until(
            answered_or_died, timeout=START_TIMEOUT, interval=0.2, max_interval=0.2
        )
    except AssertionError:
        raise RuntimeError(f"Nova at {url} did not answer within {START_TIMEOUT} s") from None
    return outcome == "answers"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: only what we started
        proc.wait(timeout=15)


BASE_FILES = "api-paste.ini;nova.conf"
METADATA_APP = "nova.wsgi.metadata:application"
COMPUTE_APP = "nova.wsgi.osapi_compute:application"


@contextmanager
def _serving(
    venv: Path,
    directory: Path,
    name: str,
    app: str,
    path: str,
    note: Report,
    config_files: str = BASE_FILES,
) -> Iterator[str]:
    """gunicorn serving ``app`` on a free port (again on another one if the port was taken
    meanwhile); yields its base URL once ``path`` answers, stops it afterwards."""
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = _start_gunicorn(venv, directory, name, app, port, config_files)
        try:
            if _answers(proc, url + path):
                yield url
                return
        finally:
            _stop(proc)
        note(f"nova: {name} gunicorn exited ({proc.returncode}) on port {port} (try {attempt})")
    raise RuntimeError(f"Nova's {name} would not start:\n{_tail(directory / f'{name}.log')}")


@contextmanager
def running_nova(
    directory: Path,
    backend: str = "sqlite",
    *,
    cache_expiration: int = 0,
    proxy: bool = True,
    api_conf: str = "",
    extra_conf: str = "",
    report: Report = _stderr_report,
) -> Iterator[Nova]:
    """Deploy, seed and serve Nova in ``directory`` (an empty scratch directory); yield it.

    ``NovaUnavailable`` when Nova cannot be installed, ``databases.Unavailable`` when the
    backend's server does not answer. ``api_conf`` goes into nova.conf's ``[api]`` section
    (vendordata options, say), ``extra_conf`` at its end (more sections).
    """
    lines: list[str] = []

    def note(line: str) -> None:
        lines.append(line)
        report(line)

    overall = time.monotonic()
    with _timed(note, "venv"):
        venv = nova_venv(note)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "lock").mkdir(exist_ok=True)
    with ExitStack() as stack:
        urls = stack.enter_context(_databases(backend, directory))
        stubs = stack.enter_context(running_stubs(directory / "neutron.json"))
        _api_paste(directory)
        conf = _write_config(
            directory,
            urls,
            stubs,
            cache_expiration=cache_expiration,
            proxy=proxy,
            api_conf=api_conf,
            extra=extra_conf,
        )
        project_id, user_id = uuid.uuid4().hex, uuid.uuid4().hex
        with _timed(note, f"schemas, cells and seed ({backend})"):
            cells = _cells(directory, backend, urls)
            seeded = _seed(venv, conf, project_id, user_id, stubs, cells)
        with _timed(note, "gunicorn: metadata and osapi_compute"):
            metadata_url = stack.enter_context(
                _serving(venv, directory, "metadata", METADATA_APP, "/", note)
            )
            compute_root = stack.enter_context(
                _serving(venv, directory, "osapi", COMPUTE_APP, "/v2.1/", note)
            )
        shapes = {
            name: Shape(
                name=name,
                uuid=facts["uuid"],
                address=facts["address"],
                keys=tuple(facts["keys"]),
                deleted=facts["deleted"],
                facts=facts,
            )
            for name, facts in seeded["shapes"].items()
        }
        note(f"nova: ready ({backend}) in {time.monotonic() - overall:.1f} s")
        yield Nova(
            backend=backend,
            directory=directory,
            conf=conf,
            metadata_url=metadata_url,
            compute_url=f"{compute_root}/v2.1",
            secret=SECRET,
            project_id=project_id,
            user_id=user_id,
            shapes=shapes,
            keypairs=seeded["keypairs"],
            stubs=stubs,
            venv=venv,
            database_urls=urls,
            timings=lines,
        )


# --- python -m tests.support.nova_peer up DIR ----------------------------------------------------


def dump(pages: dict[str, Page], path: Path) -> None:
    """A crawl as text, one ``### PATH -> STATUS [Content-Type]`` block per path."""
    with path.open("w") as out:
        for page_path, page in sorted(pages.items()):
            out.write(f"### {page_path} -> {page.status} [{page.content_type}]\n")
            if page.status == 200:
                out.write(page.body.decode("utf-8", "backslashreplace") + "\n")


def _up(directory: Path, backend: str, cache_expiration: int) -> None:
    with running_nova(directory, backend, cache_expiration=cache_expiration) as nova:
        crawls = directory / "nova-crawl"
        crawls.mkdir(exist_ok=True)
        with nova.snapshot() as snapshot:
            for shape in nova.shapes.values():
                dump(nova.crawl(shape, snapshot), crawls / f"{shape.name}.txt")
        print(f"nova.conf:     {nova.conf}")
        print(f"metadata API:  {nova.metadata_url}  (Neutron proxy mode)")
        print(f"compute API:   {nova.compute_url}  (headers X-User-Id/X-Project-Id/X-Roles)")
        print(f"secret:        {nova.secret}")
        print(f"project/user:  {nova.project_id} / {nova.user_id}")
        print(f"stub services: {nova.stubs.url}  (neutron.json: {nova.stubs.neutron_file})")
        print(f"Nova's trees:  {crawls}/<shape>.txt")
        print("shapes:")
        for shape in nova.shapes.values():
            print(
                f"  {shape.name:10} {shape.uuid}  ip={shape.address}"
                f"  keys={','.join(shape.keys) or '-'}{'  DELETED' if shape.deleted else ''}"
            )
        some = next(s for s in nova.shapes.values() if not s.deleted)
        headers = " ".join(f"-H '{k}: {v}'" for k, v in nova.metadata_headers(some.uuid).items())
        print(f"try: curl {headers} {nova.metadata_url}/openstack/latest/meta_data.json")
        print("Ctrl-C to stop.", flush=True)
        with suppress(KeyboardInterrupt):
            signal.pause()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.nova_peer")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="deploy, seed and serve Nova in DIR until Ctrl-C")
    up.add_argument("directory", type=Path)
    up.add_argument("--backend", choices=databases.BACKENDS, default="sqlite")
    up.add_argument("--cache-expiration", type=int, default=0)
    sub.add_parser("venv", help="install Nova into .cache/nova-venv (once)")
    args = parser.parse_args(argv)
    if args.command == "venv":
        print(nova_venv())
        return 0
    _up(args.directory.resolve(), args.backend, args.cache_expiration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
