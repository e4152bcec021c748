"""The drop-in keeps which cell holds an instance (``instance_mappings``) a short while, and a
mapping that changes is still honoured: an instance moved to another cell is read from there
once the watch hears of the move, one whose cached cell no longer holds it is looked up again
in the same load, a deleted one is gone. Real databases on every backend: a second cell made
beside the deployment's cell1, the loader in this process or the service as a process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, delete, event, insert, select, update

from cloudseed.metadata.loading import BY_UUID, Key
from cloudseed.nova_metadata import schema
from cloudseed.nova_metadata.databases import NovaDatabases, driver_url
from cloudseed.nova_metadata.loading import Loader
from tests.support import databases
from tests.support.nova_without_nova import (
    Instance,
    NovaDeployment,
    nova_deployment,
    now,
    running_service,
    signed,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.databases
CELL2_ID = 3
# The rows of one instance in a cell database, by the column naming the instance.
INSTANCE_ROWS = (
    (schema.instances, "uuid"),
    (schema.instance_extra, "instance_uuid"),
    (schema.instance_info_caches, "instance_uuid"),
    (schema.instance_id_mappings, "uuid"),
    (schema.block_device_mapping, "instance_uuid"),
)


@dataclass
class Cell2:
    engine: Engine


@pytest.fixture()
def nova(backend: str, tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment(backend, tmp_path) as deployment:
        deployment.neutron.groups["sg-default"] = "default"
        yield deployment


@pytest.fixture()
def cell2(nova: NovaDeployment, backend: str, tmp_path: Path) -> Iterator[Cell2]:
    """A second cell database with Nova's tables, mapped in the API database."""
    with databases.scratch_database(backend, str(tmp_path)) as url:
        engine = create_engine(driver_url(url))
        try:
            schema.cell.create_all(engine)
            with nova.api.begin() as a:
                a.execute(
                    insert(schema.cell_mappings).values(
                        id=CELL2_ID,
                        uuid="c0000000-0000-4000-8000-000000000002",
                        name="cell2",
                        database_connection=url,
                    )
                )
            yield Cell2(engine)
        finally:
            engine.dispose()


def moved(nova: NovaDeployment, instance: Instance, cell2: Cell2, *, hostname: str) -> None:
    """The instance's rows copied into cell2 (``hostname`` there, to tell the copies apart)
    and its mapping pointed at cell2, as a cross-cell move leaves them; cell1's copy stays,
    saved (Nova hides it: a live row whose ``updated_at`` moved)."""
    with nova.cell.begin() as source, cell2.engine.begin() as target:
        for table, column in INSTANCE_ROWS:
            rows = source.execute(select(table).where(table.c[column] == instance.uuid)).all()
            for row in rows:
                values: dict[str, Any] = {k: v for k, v in row._mapping.items() if k != "id"}
                if table is schema.instances:
                    values.update(hostname=hostname, updated_at=now())
                target.execute(insert(table).values(**values))
    with nova.api.begin() as a:
        a.execute(
            update(schema.instance_mappings)
            .where(schema.instance_mappings.c.instance_uuid == instance.uuid)
            .values(cell_id=CELL2_ID)
        )
    nova.save(instance)


def deleted_in(engine: Engine, instance: Instance) -> None:
    """Instance.destroy() in that cell: soft-deleted, updated_at untouched."""
    table = schema.instances
    with engine.begin() as c:
        c.execute(
            update(table)
            .where(table.c.uuid == instance.uuid)
            .values(deleted=table.c.id, deleted_at=now(), updated_at=table.c.updated_at)
        )


@contextmanager
def loader_of(nova: NovaDeployment) -> Iterator[tuple[Loader, list[str]]]:
    """A loader on the deployment's databases, and the statements it sends to the API
    database (counted as SQLAlchemy sends them)."""
    opened = NovaDatabases.open(nova.api_url, nova.cell_url)
    sent: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        sent.append(statement)

    event.listen(opened.api.engine, "before_cursor_execute", count)
    try:
        opened.check(local=False)
        sent.clear()
        yield Loader(opened, local=False, resolve=lambda _address: None), sent
    finally:
        opened.dispose()


def hostname(loader: Loader, instance: Instance) -> str | None:
    facts = loader.load([Key(BY_UUID, instance.uuid)])[Key(BY_UUID, instance.uuid)]
    return None if facts is None else facts.hostname


def test_a_mapping_read_lately_costs_no_api_statement(nova: NovaDeployment) -> None:
    one, two = nova.add_instance("one"), nova.add_instance("two")
    with loader_of(nova) as (loader, sent):
        found = loader.load([Key(BY_UUID, one.uuid), Key(BY_UUID, two.uuid)])
        assert {f.hostname for f in found.values() if f is not None} == {"one", "two"}
        assert len(sent) == 1  # both mappings in one statement
        assert hostname(loader, one) == "one"
        assert len(sent) == 1 and loader.mappings.hits == 1
        loader.mappings.forget([one.uuid])  # the watch heard of a change
        assert hostname(loader, one) == "one"
        assert len(sent) == 2


def test_a_cached_mapping_whose_cell_lost_the_instance_is_read_again(
    nova: NovaDeployment, cell2: Cell2
) -> None:
    vm = nova.add_instance("vm")
    with loader_of(nova) as (loader, sent):
        assert hostname(loader, vm) == "vm"
        # Moved and deleted in cell1, behind the cache's back (no watch here).
        moved(nova, vm, cell2, hostname="moved")
        deleted_in(nova.cell, vm)
        assert hostname(loader, vm) == "moved"
        assert len(sent) == 2 and loader.mappings.hits == 1  # the cached one, then read again
        # Deleted where it now lives, and its mapping archived: nothing, asked each time.
        deleted_in(cell2.engine, vm)
        assert hostname(loader, vm) is None
        with nova.api.begin() as a:
            a.execute(
                delete(schema.instance_mappings).where(
                    schema.instance_mappings.c.instance_uuid == vm.uuid
                )
            )
        assert hostname(loader, vm) is None


def test_an_instance_moved_to_another_cell_is_served_from_there(
    nova: NovaDeployment, cell2: Cell2
) -> None:
    vm = nova.add_instance("vm")
    conf = nova.conf(cloudseed_metadata={"change_poll_interval_ms": 100})
    with running_service(conf) as service:

        def name() -> str:
            return service.get("/latest/meta-data/hostname", signed(vm.uuid)).text

        assert name() == "vm.novalocal"  # cached, its mapping too
        # cell1's copy stays live (a hidden instance of a cross-cell move): only the mapping
        # says which copy is the instance, and the watch's report makes it read again.
        moved(nova, vm, cell2, hostname="moved")
        wait_until(lambda: name() == "moved.novalocal", timeout=10, what="the moved copy")
        # cell2 is watched once the service has read cell_mappings again (every 20 polls).
        deleted_in(cell2.engine, vm)
        wait_until(
            lambda: service.get("/latest/meta-data/hostname", signed(vm.uuid)).status_code == 404,
            timeout=15,
            what="the delete in cell2",
        )
