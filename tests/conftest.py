"""Fixtures shared by the whole suite.

``backend`` runs a test once per database backend (SQLite, PostgreSQL, MariaDB); ``settings``
points at a migrated scratch database of that backend; ``api`` is an httpx client for a real
compute API server on a random loopback port, with the tables emptied before each test;
``cloud`` is tests/support/cloud.py's small cloud in it (on a loopback network in modules marked
``loopback_guests``, whose guests talk to a metadata service: tests/support/guests.py).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import MetaData, delete
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from cloudseed.compute.fake import FakeDriver
from cloudseed.db.base import ApiBase, CellBase
from cloudseed.db.engines import Database
from cloudseed.schema import sync as schema_sync
from cloudseed.settings import Settings
from tests.support import databases
from tests.support.cloud import Cloud, make_cloud
from tests.support.databases import KEPT_TABLES, make_settings
from tests.support.guests import add_loop_network
from tests.support.server import running_api


@pytest.hookimpl(optionalhook=True)  # known only with pytest-xdist loaded (not make e2e's)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``make test``'s ``--dist loadgroup``: tests/support/scheduling.py's scheduler (one test
    at a time to a free worker, one worker for each of a costly deployment's tests)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.support.scheduling import SharedDeployments  # xdist: only with -n

    return SharedDeployments(config, log)


@pytest.fixture(scope="session")
def session_tmp() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="cloudseed-tests-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="session", params=databases.BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def database_url(backend: str, session_tmp: Path) -> Iterator[str]:
    try:
        with databases.scratch_database(backend, str(session_tmp)) as url:
            yield url
    except databases.Unavailable as exc:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def migrated_settings(database_url: str, session_tmp: Path, backend: str) -> Settings:
    settings = make_settings(database_url, session_tmp / backend)
    schema_sync.sync(settings)
    return settings


@pytest.fixture(scope="session")
def api_db(migrated_settings: Settings) -> Iterator[Database]:
    """The API database, shared by the test servers given it (tests/support/server.py) and the
    tests: what one of them commits, the others' listeners hear at once (its announcer), as
    the apps of one ``cloudseed serve`` worker do."""
    db = Database.connect("api", migrated_settings.api_database_url)
    yield db
    db.dispose()


def _empty(db: Database, metadata: MetaData = ApiBase.metadata) -> None:
    # The session-wide test server may still be finishing an earlier test's background
    # operation (the fake driver's delay), whose UPDATE can deadlock with these DELETEs on
    # PostgreSQL and MariaDB; the database aborts one side, and emptying again succeeds.
    for attempt in range(5):
        try:

            def work(session: Session) -> None:
                for table in reversed(metadata.sorted_tables):
                    if table.name not in KEPT_TABLES:
                        session.execute(delete(table))

            db.run(work, write=True)
            return
        except DBAPIError:
            if attempt == 4:
                raise
            time.sleep(0.1 * (attempt + 1))


@pytest.fixture()
def clean_api_db(api_db: Database) -> Database:
    _empty(api_db)
    return api_db


@pytest.fixture(scope="session")
def cell_db(migrated_settings: Settings, api_db: Database) -> Iterator[Database]:
    # Announcing through the API database's announcer, as the servers' cell databases do.
    db = Database.connect("cell1", migrated_settings.cell_database_url, announcer=api_db.announcer)
    yield db
    db.dispose()


@pytest.fixture()
def clean_cell_db(cell_db: Database) -> Database:
    _empty(cell_db, CellBase.metadata)
    return cell_db


@pytest.fixture(scope="module")
def module_clean_dbs(api_db: Database, cell_db: Database) -> tuple[Database, Database]:
    """Both databases emptied once, for a module whose tests share what its module-scoped
    fixtures made (so none of its tests may ask for ``api`` or ``clean_*``, which empty them)."""
    _empty(api_db)
    _empty(cell_db, CellBase.metadata)
    return api_db, cell_db


@pytest.fixture(scope="session")
def fake_driver() -> FakeDriver:
    """The driver behind the test server; tests may tell it to fail."""
    return FakeDriver(delay=0.02)


@pytest.fixture(scope="session")
def api_url(
    migrated_settings: Settings, api_db: Database, fake_driver: FakeDriver
) -> Iterator[str]:
    with running_api(migrated_settings, api_db=api_db, driver=fake_driver, zone="nova") as url:
        yield url


@pytest.fixture()
def api(
    api_url: str, clean_api_db: Database, clean_cell_db: Database, fake_driver: FakeDriver
) -> Iterator[httpx.Client]:
    """A client for the compute API, authenticated (noauth2) as user 'alice' of 'proj'."""
    with httpx.Client(
        base_url=api_url, headers={"X-Auth-Token": "alice:proj"}, timeout=30
    ) as client:
        yield client
    fake_driver.clear_failures()


@pytest.fixture()
def cloud(
    request: pytest.FixtureRequest, api: httpx.Client, api_db: Database, tmp_path: Path
) -> Cloud:
    """A flavor, two images, a network and two key pairs of alice's. Modules marked
    ``loopback_guests`` boot servers on 127.0.0.0/24 instead, to act as their guests."""
    made = make_cloud(api, api_db, tmp_path)
    if request.node.get_closest_marker("loopback_guests"):
        add_loop_network(api_db, made)
    return made
