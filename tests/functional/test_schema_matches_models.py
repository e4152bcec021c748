"""The schema the migrations build is the one the models describe, on each database: a model
changed without its migration (or the reverse) shows up here as the difference Alembic's
autogenerate would write, instead of as a query plan or a constraint that differs between a
fresh database and an upgraded one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import event

from cloudseed.db.base import ApiBase, CellBase
from cloudseed.db.engines import Database
from cloudseed.schema import registry  # noqa: F401  (every model's table in the metadata)
from cloudseed.schema import sync as schema_sync
from cloudseed.schema.registry import Kind
from cloudseed.servers import quota as usage
from tests.support import databases


@pytest.fixture
def scratch(backend: str, tmp_path: Path):
    with databases.scratch_database_or_skip(backend, str(tmp_path)) as url:
        db = Database.connect("scratch", url)
        try:
            yield db
        finally:
            db.dispose()


@pytest.mark.parametrize(("kind", "base"), [("api", ApiBase), ("cell", CellBase)])
def test_the_migrated_schema_is_the_models(scratch: Database, kind: Kind, base):
    schema_sync.upgrade(scratch, kind)
    with scratch.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), base.metadata)
    # Alembic's own table is not a model.
    differences = [
        d
        for d in differences
        if not (d[0] == "remove_table" and d[1].name.startswith("alembic_version"))
    ]
    assert differences == []


def test_the_schedulers_sums_read_the_index_alone(tmp_path: Path):
    """On SQLite, the per-host sums of every create (``usage.by_host``) are answered from
    ``ix_instances_host_usage`` without reading the instances' rows (migration cell0016): the
    plan of the very statement ``by_host`` runs."""
    db = Database.connect("cell1", f"sqlite:///{tmp_path / 'cell.sqlite'}")
    ran: list[tuple[str, Any]] = []

    def keep(_conn, _cursor, statement, parameters, _context, _many) -> None:
        if "FROM instances" in statement:
            ran.append((statement, parameters))

    try:
        schema_sync.upgrade(db, "cell")
        event.listen(db.engine, "before_cursor_execute", keep)
        with db.reader() as session:
            assert usage.by_host(session, ["h1", "h2"]) == {}
        ((statement, parameters),) = ran
        raw = db.engine.raw_connection()
        try:
            plan = " ".join(
                str(row[-1])
                for row in raw.cursor().execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
        finally:
            raw.close()
        assert "USING COVERING INDEX ix_instances_host_usage" in plan, plan
    finally:
        db.dispose()
