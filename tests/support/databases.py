"""Throw-away databases on every backend the machine offers.

SQLite always; PostgreSQL and MariaDB/MySQL when their servers answer (administrative URLs from
CLOUDSEED_TEST_POSTGRESQL_URL / CLOUDSEED_TEST_MYSQL_URL, defaulting to the local servers this
project's machines run). Each test session creates its own uniquely named database and drops it
at the end. With CLOUDSEED_REQUIRE_DBS=1 (CI) an unreachable server is a failure, not a skip.
``make_settings`` points cloudseed's settings at one of them; ``KEPT_TABLES`` are the tables the
suite does not empty between tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from cloudseed.settings import Settings, load_settings

BACKENDS = ("sqlite", "postgresql", "mariadb")
ADMIN_URLS = {
    "postgresql": os.environ.get(
        "CLOUDSEED_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
    "mariadb": os.environ.get(
        "CLOUDSEED_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/mysql"
    ),
}


def required() -> bool:
    return os.environ.get("CLOUDSEED_REQUIRE_DBS") == "1"


class Unavailable(Exception):
    pass


@contextmanager
def scratch_database(backend: str, tmp_dir: str) -> Iterator[str]:
    """Yield the URL of a new, empty database; drop it afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_dir}/scratch-{uuid.uuid4().hex[:8]}.sqlite"
        return
    admin_url = make_url(ADMIN_URLS[backend])
    name = f"cloudseed_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if backend == "postgresql":
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            else:
                conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    except Exception as exc:  # any connection failure means: not available here
        admin.dispose()
        raise Unavailable(
            f"{backend} at {admin_url.render_as_string(hide_password=True)} "
            f"is not reachable: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            if backend == "postgresql":
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            else:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


@contextmanager
def scratch_database_or_skip(backend: str, tmp_dir: str) -> Iterator[str]:
    """``scratch_database``, or the test skipped where ``backend`` is not reachable (failed
    when ``CLOUDSEED_REQUIRE_DBS=1``)."""
    try:
        with scratch_database(backend, tmp_dir) as url:
            yield url
    except Unavailable as exc:
        if required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {exc}")
        pytest.skip(str(exc))


def make_settings(database_url: str, state_path: Path, **env: str) -> Settings:
    """Settings with both databases at ``database_url``, state under ``state_path``, and
    ``env`` (``CLOUDSEED_...`` variables) on top."""
    environ = {
        "CLOUDSEED_API_DATABASE__CONNECTION": database_url,
        "CLOUDSEED_DATABASE__CONNECTION": database_url,
        "CLOUDSEED_STATE_PATH": str(state_path),
    }
    environ.update(env)
    return load_settings(environ=environ)


# cell_mappings: written by db sync, needed by every test. services and compute_nodes: the
# session-wide test server's compute agent registered there, and a server is scheduled only
# to a registered host (its heartbeat would bring them back, but only after report_interval).
KEPT_TABLES = frozenset({"cell_mappings", "services", "compute_nodes"})
