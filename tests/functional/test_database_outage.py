"""A PostgreSQL server that is shutting down (or starting up) refuses every new connection with
FATAL 57P03 ("the database system is shutting down"): the compute API must answer that as the
outage it is, 503, not 500. Found by the soak (bench/soak.py, issue 30): every restart of the
database gave a few 500s on the compute API, the Glance slice and the metadata service while
their pools reconnected.

On a PostgreSQL cluster of the test's own (tests/support/private_postgres.py): the shared
server must not be stopped. A smart shutdown waits for its last client, and until then refuses
new connections: the test keeps one connection open to hold that state, cuts the API's pooled
connections, and asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import text

from cloudseed.db.engines import Database
from cloudseed.errors import DatabaseUnavailable
from cloudseed.schema import sync as schema_sync
from tests.support import databases
from tests.support.databases import make_settings
from tests.support.ports import free_port
from tests.support.private_postgres import PrivatePostgres, Unavailable, private_postgres
from tests.support.server import running_api
from tests.support.waiting import wait_until


@pytest.fixture()
def postgres() -> Iterator[PrivatePostgres]:
    try:
        with private_postgres(free_port(), "cloudseed") as cluster:
            yield cluster
    except Unavailable as exc:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {exc}")
        pytest.skip(str(exc))


def _holder(postgres: PrivatePostgres) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host="127.0.0.1", port=postgres.port, user="postgres", dbname="postgres", autocommit=True
    )


def _refusing(postgres: PrivatePostgres) -> bool:
    try:
        _holder(postgres).close()
    except psycopg.OperationalError as exc:
        return "shutting down" in str(exc)
    return False


def test_a_database_shutting_down_is_unavailable(postgres: PrivatePostgres) -> None:
    holder = _holder(postgres)
    try:
        postgres.begin_smart_stop()
        wait_until(lambda: _refusing(postgres), what="new connections refused")
        db = Database.connect("api", postgres.url("cloudseed"))
        try:
            with pytest.raises(DatabaseUnavailable):
                db.run(lambda session: session.execute(text("SELECT 1")))
            with pytest.raises(DatabaseUnavailable), db.read() as session:
                session.execute(text("SELECT 1"))
        finally:
            db.dispose()
    finally:
        holder.close()


def test_the_api_answers_503_while_the_database_shuts_down(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    settings = make_settings(postgres.url("cloudseed"), tmp_path)
    schema_sync.sync(settings)
    auth = {"X-Auth-Token": "alice:proj"}
    with running_api(settings, compute=False) as url, httpx.Client(base_url=url) as api:
        assert api.get("/v2.1/servers", headers=auth).status_code == 200
        assert api.get("/image/v2/images", headers=auth).status_code == 200
        holder = _holder(postgres)
        try:
            postgres.begin_smart_stop()
            wait_until(lambda: _refusing(postgres), what="new connections refused")
            # The API's pooled connections go, as they do when a restart cuts them; each
            # request must open a new one, which the stopping server refuses.
            holder.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = 'cloudseed'"
            )
            for path in ("/v2.1/servers", "/image/v2/images", "/v2.1/os-keypairs"):
                r = api.get(path, headers=auth)
                assert r.status_code == 503, (path, r.status_code, r.text[:300])
            assert api.get("/healthz").status_code == 503
        finally:
            holder.close()
        # Stopped, then started again: answers as before.
        postgres.wait_stopped()
        assert api.get("/v2.1/servers", headers=auth).status_code == 503
        postgres.start()
        wait_until(
            lambda: api.get("/v2.1/servers", headers=auth).status_code == 200,
            what="the API answering again",
        )
