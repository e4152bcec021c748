"""Fuzzing (issue 13): hostile requests to every compute API route and every metadata path of
real servers, asserting no 5xx, Nova-shaped faults on 4xx (Glance-shaped under ``/image/``),
and no database change for a rejected request.

The compute routes are read from the app (``api.app.domain_routes``), so a new route is fuzzed
without a change here. Bodies come from the JSON Schemas the routes declare (servers/schemas.py,
keypairs/schemas.py), valid or with one part made hostile (tests/support/fuzzing.py), or are
plain hostile values; headers, query strings and path parameters are drawn likewise. SQLite
only (the requests, not the backend, are under test).

``CLOUDSEED_FUZZ_EXAMPLES`` sets the examples per test (default 10, about a minute in all);
``make fuzz`` runs many more (docs/fuzzing.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import traceback
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from cloudseed.api.app import domain_routes
from cloudseed.db.base import ApiBase, CellBase
from cloudseed.db.engines import Database
from cloudseed.images import schemas as image_schemas
from cloudseed.keypairs import schemas as keypair_schemas
from cloudseed.networks import service as networks
from cloudseed.servers import schemas as server_schemas
from cloudseed.servers.models import Instance, InstanceExtra
from cloudseed.web.microversions import MAX_VERSION, APIVersion
from tests.support.cloud import Cloud, create_server, make_cloud, wait_for
from tests.support.databases import KEPT_TABLES
from tests.support.fuzzing import BIG_DIGITS, HOSTILE_STRINGS, Raw, dumps, from_schema, spoiled
from tests.support.fuzzing import hostile as hostile_value
from tests.support.server import running_metadata
from tests.support.snapshot import Snapshot, changes, snapshot
from tests.support.waiting import wait_until

EXAMPLES = int(os.environ.get("CLOUDSEED_FUZZ_EXAMPLES", "10"))
# A file to append each failure to (one JSON line: route, input, status, the server's traceback
# line) instead of stopping at the first: how docs/fuzzing.md's list is made.
REPORT = os.environ.get("CLOUDSEED_FUZZ_REPORT")
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=EXAMPLES <= 10,  # the default suite runs the same examples every time
    phases=[Phase.explicit, Phase.generate],  # a failure is reported with its input; no shrink
    suppress_health_check=list(HealthCheck),
)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # None: no body; else JSON-ish (tests/support/fuzzing.py's dumps)

    def text(self) -> str | None:
        return None if self.body is None else dumps(self.body)


class _Tracebacks(logging.Handler):
    """The server's logged exceptions (it runs in this process): where a 500 came from."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            frames = traceback.extract_tb(exc.__traceback__)
            where = next(
                (
                    f"{f.filename.split('/src/')[-1]}:{f.lineno}"
                    for f in reversed(frames)
                    if "/cloudseed/" in f.filename
                ),
                "?",
            )
            self.seen.append(f"{type(exc).__name__}: {str(exc)[:200]} at {where}")


@contextlib.contextmanager
def outcome(route: str, request: Request) -> Iterator[None]:
    """Run one request's checks; with CLOUDSEED_FUZZ_REPORT, record a failure and go on."""
    handler = _Tracebacks()
    logging.getLogger().addHandler(handler)
    try:
        yield
    except AssertionError as exc:
        if not REPORT:
            raise
        with open(REPORT, "a") as fh:
            line = {
                "route": route,
                "request": dumps([request.method, request.path, request.query, request.headers])[
                    :600
                ],
                "body": (request.text() or "")[:600],
                "failure": str(exc)[:600],
                "server": handler.seen,
            }
            fh.write(json.dumps(line, ensure_ascii=True) + "\n")
    finally:
        logging.getLogger().removeHandler(handler)


# -- the world the requests hit -------------------------------------------------------------


@dataclass
class World:
    client: httpx.Client = field(repr=False)
    api_db: Database = field(repr=False)
    cell_db: Database = field(repr=False)
    cloud: Cloud = field(repr=False)
    server_id: str


def _empty(db: Database) -> None:
    def work(session: Session) -> None:
        for metadata in (CellBase.metadata, ApiBase.metadata):
            for table in reversed(metadata.sorted_tables):
                if table.name not in KEPT_TABLES:
                    session.execute(delete(table))

    db.run(work, write=True)


# The requests are under test, not the backend: the fuzzers run on SQLite only.
on_sqlite = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture(scope="module")
def world(
    backend: str, api_url: str, api_db: Database, cell_db: Database, tmp_path_factory: Any
) -> Iterator[World]:
    _empty(api_db)
    with httpx.Client(base_url=api_url, headers={"X-Auth-Token": "alice:proj"}, timeout=60) as c:
        cloud = make_cloud(c, api_db, tmp_path_factory.mktemp("fuzz"))
        api_db.run(
            lambda session: networks.add_network(
                session, name="loop", cidr="127.0.0.0/24", gateway="127.0.0.1"
            ),
            write=True,
        )
        server_id = create_server(c, cloud, metadata={"role": "web"}, key_name="key1")["id"]
        wait_for(c, server_id, "ACTIVE")
        yield World(c, api_db, cell_db, cloud, server_id)
    _empty(api_db)


def settle(world: World) -> Snapshot:
    """Wait until background operations are done (nothing changes for a moment: 30 ms
    between two snapshots)."""
    last: list[Snapshot] = []

    def settled() -> tuple[Snapshot] | None:
        after = snapshot(world.api_db, world.cell_db)
        quiet = bool(last) and after == last[-1] and not _busy(world.cell_db)
        last[:] = [after]
        return (after,) if quiet else None  # a tuple: an empty snapshot is an answer too

    (after,) = wait_until(
        settled,
        timeout=20,
        interval=0.03,
        max_interval=0.03,
        what="background operations settled",
    )
    return after


def _busy(cell_db: Database) -> bool:
    """Whether an instance still has a task (a background operation is working on it)."""
    with cell_db.read() as session:
        return bool(session.scalar(select(func.count()).where(Instance.task_state.is_not(None))))


# -- compute API ------------------------------------------------------------------------------

ROUTES = sorted(
    {
        (method, route.path)
        for route in domain_routes()
        if "{project_id}" not in route.path  # the same handlers: drawn as a path variant
        for method in sorted(route.methods or ())
        if method != "HEAD"
    }
)
VERSIONS = ["2.1", "2.2", "2.10", "2.19", "2.35", "2.37", "2.54", "2.57", "2.90", "2.94"]
VERSIONS.append(str(MAX_VERSION))
QUERY_NAMES = ["limit", "marker", "all_tenants", "name", "status", "changes-since", "user_id"]
QUERY_NAMES += ["key_name", "sort_key", "sort_dir", "flavor", "image", "length", "deleted"]


def _body_schemas(method: str, path: str, version: APIVersion) -> list[dict[str, Any]]:
    s, k = server_schemas, keypair_schemas
    if method == "POST" and path == "/v2.1/servers":
        return [s.create(version)]
    if method == "PUT" and path == "/v2.1/servers/{server_id}":
        return [s.update(version)]
    if path.endswith("/action"):

        def wrap(key: str, schema: dict[str, Any]) -> dict[str, Any]:
            return {"type": "object", "properties": {key: schema}, "required": [key]}

        return [
            s.rebuild(version),
            s.reboot(version),
            wrap("os-stop", {"type": "null"}),
            wrap("os-start", {"type": "null"}),
            wrap("os-getConsoleOutput", s.CONSOLE_OUTPUT),
        ]
    if path.endswith("/metadata"):
        return [s.METADATA_BODY]
    if path.endswith("/metadata/{key}"):
        return [s.METADATA_ITEM_BODY]
    if method == "POST" and path.endswith("/os-keypairs"):
        return [k.CREATE_V21, k.CREATE_V22, k.CREATE_V210, k.CREATE_V292]
    if method == "PUT" and path.endswith("/os-project-keys/{id}"):
        return [s.PROJECT_KEYS]
    if method == "POST" and path == "/image/v2/images":
        return [image_schemas.CREATE]
    return []


def _path_value(name: str, world: World) -> st.SearchStrategy[str]:
    real = {
        "server_id": world.server_id,
        "name": "key1",
        "key": "role",
        "flavor_id": "1",
        "image_id": world.cloud.image_id,
        "network_id": world.cloud.network_id,
        "request_id": "req-00000000-0000-0000-0000-000000000000",
    }.get(name, "x")
    return st.one_of(
        st.just(real),
        st.uuids().map(str),
        st.sampled_from([s for s in HOSTILE_STRINGS if s and len(s) < 2000]),
        st.text(max_size=20).filter(bool),
    )


def _anchored(body: Any, world: World, keep: bool) -> Any:
    """Real references in a generated body (most of the time), so that requests get past the
    image, flavor, key pair and network lookups to the code behind them."""
    if keep or not isinstance(body, dict):
        return body
    for key, real in (
        ("server", {"imageRef": world.cloud.image_id, "flavorRef": "1", "key_name": "key1"}),
        ("rebuild", {"imageRef": world.cloud.image2_id, "key_name": "key1"}),
    ):
        inner = body.get(key)
        if isinstance(inner, dict):
            inner = {**inner, **{k: v for k, v in real.items() if k in inner or k != "key_name"}}
            if key == "server":
                inner.pop("block_device_mapping_v2", None)
                if "networks" in inner:
                    inner["networks"] = [{"uuid": world.cloud.network_id}]
                for count in ("min_count", "max_count"):
                    inner.pop(count, None)
            body = {**body, key: inner}
    return body


def _valid(schema: dict[str, Any], world: World) -> st.SearchStrategy[Any]:
    return st.tuples(from_schema(schema), st.integers(0, 4)).map(
        lambda pair: _anchored(pair[0], world, keep=pair[1] == 4)
    )


@st.composite
def compute_requests(draw: st.DrawFn, method: str, path: str, world: World) -> Request:
    version_text = draw(st.sampled_from(VERSIONS))
    version = APIVersion.parse(version_text)
    schemas = _body_schemas(method, path, version)
    concrete = path
    for name in re.findall(r"\{(\w+)\}", path):
        value = draw(_path_value(name, world))
        if method == "DELETE" and value in (world.server_id, world.cloud.image_id):
            value = "00000000-0000-0000-0000-000000000000"  # the others need them
        concrete = concrete.replace("{" + name + "}", _quote(value, safe=""))
    if draw(st.booleans()) and concrete.startswith("/v2.1/"):
        project = draw(st.sampled_from(["proj", "other", "%00"]))
        concrete = concrete.replace("/v2.1/", f"/v2.1/{project}/", 1)
    headers = {"X-Auth-Token": draw(st.sampled_from(["alice:proj", "admin:proj", "bob:other"]))}
    header_version = f"compute {version_text}"
    if draw(st.integers(0, 9)) == 0:  # now and then a hostile one (most requests get past it)
        header_version = draw(
            st.sampled_from(
                [
                    "compute latest",
                    "compute 3.0",
                    "compute 2.999",
                    "compute 2." + "9" * 5000,
                    "compute",
                    "volume 2.5",
                    "compute 2.1, compute 2.5",
                    "compute \x7f",
                    "",
                    "compute 2.1, " + "x" * 9000,
                ]
            )
        )
    headers["OpenStack-API-Version"] = header_version
    if draw(st.booleans()):
        headers["X-OpenStack-Nova-API-Version"] = draw(st.sampled_from(["2.1", "2.50", "x", ""]))
    body: Any = None
    if method in ("POST", "PUT"):
        if schemas:
            body = draw(
                st.one_of(
                    *[spoiled(_valid(s, world)) for s in schemas * 4],
                    hostile_value(),
                )
            )
        else:
            body = draw(st.one_of(st.none(), hostile_value()))
        headers["Content-Type"] = draw(
            st.sampled_from(
                [
                    "application/json",
                    "application/json",
                    "application/json",
                    "application/json; charset=latin-1",
                    "text/plain",
                    "application/vnd.openstack.compute+json",
                    "multipart/form-data; boundary=x",
                    "application/octet-stream",
                ]
            )
        )
    query = draw(
        st.dictionaries(
            st.sampled_from(QUERY_NAMES),
            st.one_of(
                st.sampled_from(["1", "0", "-1", "true", "", BIG_DIGITS, "2020-01-01T00:00:00"]),
                st.text(max_size=10),
            ),
            max_size=3,
        )
    )
    return Request(method, concrete, query, headers, body)


def _quote(text: str, *, safe: str) -> str:
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe=safe)


def _send(client: httpx.Client, request: Request) -> httpx.Response:
    text = request.text()
    return client.request(
        request.method,
        request.path,
        params=request.query,
        headers=request.headers,
        content=None if text is None else text.encode("utf-8", "surrogatepass"),
    )


# The HTTP parser's own answer to a request it cannot read (before any app code), as any web
# server in front of Nova would give.
PARSER_REJECTION = (400, "Invalid HTTP request received.")
# The head limits' answers ([wsgi] max_request_line, max_header_line, max_header_size), also
# given before any app code reads the request (docs/api-differences.md, "Edge").
HEAD_LIMIT_REJECTIONS = {(414, "URI Too Long\n"), (431, "Request Header Fields Too Large\n")}


def _check_fault(response: httpx.Response) -> None:
    answer = (response.status_code, response.text)
    if answer == PARSER_REJECTION or answer in HEAD_LIMIT_REJECTIONS:
        return
    try:
        body = response.json()
    except ValueError as exc:
        status, text = response.status_code, response.text[:300]
        raise AssertionError(f"not a Nova fault: {status} {text!r}") from exc
    if response.url.path.startswith("/image/"):  # the Glance slice: Glance's body
        assert isinstance(body, dict) and set(body) == {"message", "code", "title"}, body
        assert body["code"] == f"{response.status_code} {body['title']}", body
        assert isinstance(body["message"], str), body
        return
    assert isinstance(body, dict) and len(body) == 1, body
    ((name, fault),) = body.items()
    assert isinstance(name, str) and isinstance(fault, dict), body
    assert fault.get("code") == response.status_code, body
    assert isinstance(fault.get("message"), str), body


@on_sqlite
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_compute_route(world: World, method: str, path: str) -> None:
    @FUZZ
    @given(request=compute_requests(method, path, world))
    def run(request: Request) -> None:
        with outcome(f"{method} {path}", request):
            before = snapshot(world.api_db, world.cell_db)
            response = _send(world.client, request)
            if response.status_code < 400:
                settle(world)
            assert response.status_code < 500, (response.status_code, response.text[:500])
            if 400 <= response.status_code < 500:
                _check_fault(response)
                after = snapshot(world.api_db, world.cell_db)
                assert changes(before, after) == [], (response.status_code, response.text[:300])

    run()


# -- metadata service ---------------------------------------------------------------------------

METADATA_PATHS = [
    "/",
    "/openstack",
    "/openstack/latest",
    "/openstack/latest/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/vendor_data.json",
    "/openstack/latest/vendor_data2.json",
    "/openstack/latest/network_data.json",
    "/openstack/latest/password",
    "/openstack/latest/phone_home",
    "/openstack/latest/authorized_keys",
    "/openstack/latest/authorized_keys?user=root",
    "/openstack/2012-08-10/meta_data.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/meta-data/placement/availability-zone",
    "/latest/user-data",
    "/2009-04-04/meta-data/instance-id",
    "/latest/api/token",
    "/latest/dynamic/instance-identity/document",
    "/latest/dynamic/instance-identity/pkcs7",
    "/2009-04-04/dynamic/instance-identity/signature",
    "/openstack/latest/identity_token",
    "/openstack/latest/identity_token?audience=vault",
]


@st.composite
def metadata_requests(draw: st.DrawFn) -> Request:
    path = draw(st.sampled_from(METADATA_PATHS))
    if draw(st.booleans()):
        extra = draw(st.sampled_from([s for s in HOSTILE_STRINGS if len(s) < 2000]))
        path = path.rstrip("/") + "/" + _quote(extra, safe="/")
    elif "?" not in path and draw(st.booleans()):
        extra = draw(st.sampled_from([s for s in HOSTILE_STRINGS if len(s) < 2000]))
        path += "?audience=" + _quote(extra, safe="")
    method = draw(st.sampled_from(["GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]))
    headers: dict[str, str] = {}
    for name in draw(
        st.lists(
            st.sampled_from(
                [
                    "X-Forwarded-For",
                    "Forwarded",
                    "X-Instance-ID",
                    "X-Instance-ID-Signature",
                    "X-Tenant-ID",
                    "X-Metadata-Provider",
                    "X-aws-ec2-metadata-token",
                    "X-aws-ec2-metadata-token-ttl-seconds",
                    "Content-Type",
                ]
            ),
            max_size=3,
            unique=True,
        )
    ):
        headers[name] = draw(
            st.sampled_from(
                [
                    "127.0.0.2",
                    "10.0.0.3",
                    "for=127.0.0.3",
                    "",
                    "0",
                    "21600",
                    "-1",
                    "x" * 300,
                    BIG_DIGITS,
                ]
            )
        )
    body = None
    if method in ("POST", "PUT"):
        body = draw(st.one_of(st.text(max_size=300), hostile_value().map(dumps), st.just("")))
    return Request(method, path, {}, headers, body)


@pytest.fixture(scope="module")
def metadata_url(world: World, migrated_settings: Any) -> Iterator[str]:
    with running_metadata(migrated_settings, api_db=world.api_db) as url:
        yield url


@on_sqlite
def test_metadata_paths(world: World, metadata_url: str) -> None:
    guest = create_server(
        world.client,
        world.cloud,
        "2.37",
        networks=[{"uuid": _loop_network(world)}],
        user_data="IyEvYmluL3NoCg==",
    )
    server = wait_for(world.client, guest["id"], "ACTIVE", version="2.37")
    (port,) = server["addresses"]["loop"]
    transport = httpx.HTTPTransport(local_address=port["addr"])
    with httpx.Client(base_url=metadata_url, timeout=30, transport=transport) as md:
        ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}
        session = {"X-aws-ec2-metadata-token": md.put("/latest/api/token", headers=ttl).text}
        # Reading its keys records their delivery once (a write after a 200, live keys):
        # done before fuzzing, so that no refused request's snapshot can see it land.
        assert md.get("/openstack/latest/meta_data.json").status_code == 200
        _wait_for_key_delivery(world, guest["id"])

        @FUZZ
        @given(request=metadata_requests())
        def run(request: Request) -> None:
            with outcome("metadata", request):
                before = snapshot(world.api_db, world.cell_db)
                body = request.body
                headers = request.headers
                if "identity_token" in request.path:
                    # Past the session token check, so the audience is what gets fuzzed.
                    headers = {**session, **headers}
                response = md.request(
                    request.method,
                    request.path,
                    headers=headers,
                    content=None if body is None else body.encode("utf-8", "surrogatepass"),
                )
                assert response.status_code < 500, (response.status_code, response.text[:500])
                if 400 <= response.status_code < 500:
                    after = snapshot(world.api_db, world.cell_db)
                    assert changes(before, after) == [], (response.status_code, response.text)

        run()


def _wait_for_key_delivery(world: World, uuid: str) -> None:
    query = select(InstanceExtra.keys_applied_generation).where(InstanceExtra.instance_uuid == uuid)

    def recorded() -> object:
        with world.cell_db.read() as session:
            return session.scalar(query)

    wait_until(recorded, timeout=10, max_interval=0.01, what="the key delivery recorded")


def _loop_network(world: World) -> str:
    with world.api_db.read() as session:
        return networks.get_network(session, "loop").uuid


def test_the_writer_sends_what_json_cannot() -> None:
    assert dumps({"a": [Raw("1" * 5), "\ud800", float("inf")]}) == '{"a":[11111,"\\ud800",1e999]}'


# -- the inputs issue 13 names, sent every run --

S = "\ud800"
ISSUE_13_INPUTS: list[tuple[str, str, dict[str, Any] | Raw | None, dict[str, str]]] = [
    ("POST", "/v2.1/servers", {"server": {"adminPass": S}}, {}),
    ("POST", "/v2.1/servers", {"server": {"metadata": {"a": S}}}, {}),
    ("POST", "/v2.1/servers", {"server": {"description": S}}, {"v": "2.19"}),
    ("POST", "/v2.1/servers", {"server": {"imageRef": S}}, {}),
    ("POST", "/v2.1/servers", {"server": {"flavorRef": S}}, {}),
    ("POST", "/v2.1/servers", {"server": {"networks": [{"uuid": S}]}}, {}),
    ("POST", "/v2.1/servers", {"server": {"min_count": "0"}}, {}),
    ("POST", "/v2.1/servers", {"server": {"max_count": Raw(BIG_DIGITS)}}, {}),
    ("POST", "/v2.1/servers", {"server": {"max_count": 1000000000}}, {}),
    ("POST", "{server}/action", {"rebuild": {"name": "new", "adminPass": S}}, {}),
    ("POST", "{server}/action", {"rebuild": {"metadata": {"a": S}}}, {}),
    ("POST", "{server}/action", {"rebuild": {"key_name": S}}, {"v": "2.54"}),
    ("POST", "{server}/action", {"os-getConsoleOutput": {"length": BIG_DIGITS}}, {}),
    ("PUT", "{server}/metadata/a", {"meta": {"a": S}}, {}),
    ("GET", "/v2.1/os-keypairs?limit=" + BIG_DIGITS, None, {"v": "2.35"}),
    ("GET", "/v2.1/servers", None, {"v": "2." + BIG_DIGITS}),
]


@on_sqlite
@pytest.mark.parametrize(
    ("method", "path", "fields", "options"),
    ISSUE_13_INPUTS,
    ids=[f"{i}-{m} {p.partition('?')[0]}" for i, (m, p, _, _) in enumerate(ISSUE_13_INPUTS)],
)
def test_issue_13_inputs(
    world: World, method: str, path: str, fields: Any, options: dict[str, str]
) -> None:
    version = options.get("v", "2.1")
    body: Any = fields
    if isinstance(fields, dict) and "server" in fields:
        base: dict[str, Any] = {"name": "vm", "imageRef": world.cloud.image_id, "flavorRef": "1"}
        body = {"server": {**base, **fields["server"]}}
    if isinstance(fields, dict) and "rebuild" in fields:
        body = {"rebuild": {"imageRef": world.cloud.image2_id, **fields["rebuild"]}}
    full, _, query = path.replace("{server}", f"/v2.1/servers/{world.server_id}").partition("?")
    request = Request(
        method,
        full,
        dict(urllib.parse.parse_qsl(query)),
        {"OpenStack-API-Version": f"compute {version}", "Content-Type": "application/json"},
        body,
    )
    before = snapshot(world.api_db, world.cell_db)
    response = _send(world.client, request)
    if response.status_code < 400:
        settle(world)
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code >= 400:
        _check_fault(response)
        assert changes(before, snapshot(world.api_db, world.cell_db)) == []
