"""Migrations that move data, run on each database: rows written at the revision before, then
the upgrade, then what the rows hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from cloudseed.db.engines import Database
from cloudseed.schema import sync as schema_sync
from cloudseed.servers.models import Instance, InstanceExtra
from tests.support import databases
from tests.support.instances import add_instance


@pytest.fixture
def cell_at_0013(backend: str, tmp_path: Path):
    with databases.scratch_database_or_skip(backend, str(tmp_path)) as url:
        db = Database.connect("cell1", url)
        try:
            schema_sync.upgrade(db, "cell", "cell0013")
            yield db
        finally:
            db.dispose()


def _instance(db: Database, flavor: str | None, **columns: int) -> str:
    """An instance as written before cell0014 (the ORM's table is the same at cell0013)."""
    uid = add_instance(db, name="old", columns=columns)
    if flavor is not None:
        with db.engine.begin() as conn:
            conn.execute(insert(InstanceExtra).values(instance_uuid=uid, flavor=flavor))
    return uid


def test_instances_from_before_their_resource_columns_get_them_from_their_flavor(cell_at_0013):
    db = cell_at_0013
    snapshot = {"id": "f", "name": "m1", "vcpus": 2, "ram": 2048, "disk": 20, "ephemeral": 0}
    old = _instance(db, json.dumps(snapshot))
    kept = _instance(db, json.dumps({**snapshot, "vcpus": 8}), vcpus=4, memory_mb=512, root_gb=1)
    without = _instance(db, None)
    empty = _instance(db, "{}")
    broken = _instance(db, "{not json")
    odd = _instance(db, json.dumps({**snapshot, "vcpus": "2", "ram": True}))

    schema_sync.upgrade(db, "cell")

    with db.engine.connect() as conn:
        rows = {
            row.uuid: (row.vcpus, row.memory_mb, row.root_gb)
            for row in conn.execute(
                select(Instance.uuid, Instance.vcpus, Instance.memory_mb, Instance.root_gb)
            )
        }
    assert rows[old] == (2, 2048, 20)
    assert rows[kept] == (4, 512, 1)  # copied at create: never rewritten
    for unknown in (without, empty, broken, odd):
        assert rows[unknown] == (None, None, None)
    assert schema_sync.current_revision(db, "cell") == schema_sync.head_revision("cell")
