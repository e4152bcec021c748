"""Fuzzing (issue 13): hostile requests to every compute API route and every metadata path of
real servers, asserting no 5xx, Nova-shaped faults on 4xx (Glance-shaped under ``/image/``),
and no database change for a rejected request.

The compute routes are read from the app (``api.app.domain_routes``), so a new route is fuzzed
without a change here. Bodies come from the JSON Schemas the routes declare (servers/schemas.py,
keypairs/schemas.py), valid or with one part made hostile (tests/support/fuzzing.py), or are
plain hostile values; headers, query strings and path parameters are drawn likewise
(tests/support/fuzz_requests.py, which the soak's fuzzer shares). SQLite only (the requests,
not the backend, are under test).

``CLOUDSEED_FUZZ_EXAMPLES`` sets the examples per test (default 10, about a minute in all);
``make fuzz`` runs many more (docs/fuzzing.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import traceback
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from cloudseed.db.base import ApiBase, CellBase
from cloudseed.db.engines import Database
from cloudseed.networks import service as networks
from cloudseed.servers.models import Instance, InstanceExtra
from tests.support.cloud import Cloud, create_server, make_cloud, wait_for
from tests.support.databases import KEPT_TABLES
from tests.support.fuzz_requests import (
    ROUTES,
    Request,
    Targets,
    check_fault,
    compute_requests,
    metadata_requests,
    send,
)
from tests.support.fuzzing import BIG_DIGITS, Raw, dumps
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

    @property
    def targets(self) -> Targets:
        c = self.cloud
        return Targets(self.server_id, c.image_id, c.image2_id, c.network_id)


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


@on_sqlite
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_compute_route(world: World, method: str, path: str) -> None:
    @FUZZ
    @given(request=compute_requests(method, path, world.targets))
    def run(request: Request) -> None:
        with outcome(f"{method} {path}", request):
            before = snapshot(world.api_db, world.cell_db)
            response = send(world.client, request)
            if response.status_code < 400:
                settle(world)
            assert response.status_code < 500, (response.status_code, response.text[:500])
            if 400 <= response.status_code < 500:
                check_fault(response)
                after = snapshot(world.api_db, world.cell_db)
                assert changes(before, after) == [], (response.status_code, response.text[:300])

    run()


# -- metadata service ---------------------------------------------------------------------------


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
    response = send(world.client, request)
    if response.status_code < 400:
        settle(world)
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if response.status_code >= 400:
        check_fault(response)
        assert changes(before, snapshot(world.api_db, world.cell_db)) == []
