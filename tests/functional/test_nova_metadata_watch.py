"""The drop-in's change watch (nova_metadata/changes.py) polls each cell on a connection of its
own: no pool checkout per poll, so no pool pre-ping (a transaction of its own on PostgreSQL):
one statement and, on PostgreSQL, one transaction per poll, counted by the database itself. A
connection the database killed is replaced within the poll. Real databases."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from cloudseed.nova_metadata.changes import NovaChanges
from cloudseed.nova_metadata.databases import open_database
from tests.support import databases
from tests.support.nova_without_nova import NovaDeployment, nova_deployment

pytestmark = pytest.mark.databases
POLLS = 20


@pytest.fixture()
def nova(backend: str, tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment(backend, tmp_path) as deployment:
        yield deployment


def test_polls_take_no_connection_from_the_pool(nova: NovaDeployment) -> None:
    db = open_database("cell1", nova.cell_url)
    checkouts = [0]

    def checked_out(*_args: Any) -> None:
        checkouts[0] += 1

    event.listen(db.engine, "checkout", checked_out)
    watch = NovaChanges(lambda: [db], interval=0.5)
    try:
        watch.add_cells()
        vm = nova.add_instance("vm")
        nova.save(vm)
        changed = set()
        for _ in range(POLLS):
            changed |= {change.uuid for change in watch.poll_once()}
        assert changed == {vm.uuid}
        assert checkouts[0] == 1  # the watch's own connection, once
        assert watch.statements == POLLS + 1  # the cursors' first read, then one per poll
    finally:
        for cell in list(watch._cells.values()):
            cell.close()
        db.dispose()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_poll_is_one_transaction_and_a_killed_connection_is_replaced(
    nova: NovaDeployment,
) -> None:
    name = make_url(nova.cell_url).database
    admin = create_engine(
        make_url(databases.ADMIN_URLS["postgresql"]), isolation_level="AUTOCOMMIT"
    )

    def transactions() -> int:
        """The cell database's committed and rolled-back transactions, once every backend
        that used it has gone (a backend reports its counts as it exits)."""
        with admin.connect() as c:
            c.execute(text("SELECT pg_stat_clear_snapshot()"))
            return int(
                c.execute(
                    text(
                        "SELECT xact_commit + xact_rollback FROM pg_stat_database "
                        "WHERE datname = :name"
                    ),
                    {"name": name},
                ).scalar_one()
            )

    def settled() -> int:
        nova.cell.dispose()  # the test's own connections go too
        last = transactions()
        for _ in range(50):
            time.sleep(0.2)
            now = transactions()
            if now == last:
                return now
            last = now
        raise AssertionError("the transaction count did not settle")

    try:
        before = settled()
        db = open_database("cell1", nova.cell_url)
        watch = NovaChanges(lambda: [db], interval=0.5)
        watch.add_cells()
        for _ in range(POLLS):
            watch.poll_once()
        # The server ends the watch's backend: the next poll finds its connection dead and
        # reads on a new one, without failing.
        with admin.connect() as c:
            killed = c.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            ).scalar_one()
        assert killed >= 1
        watch.poll_once()
        assert watch.statements == POLLS + 2
        for cell in list(watch._cells.values()):
            cell.close()
        db.dispose()
        spent = settled() - before
        # The first connection's set-up (SQLAlchemy's first-connect queries) and the
        # cursors' first read, a poll each, the replacement's pre-ping: with a pre-ping per
        # poll it was 2 per poll (43 for 20 polls in docs/benchmarks.md's check).
        assert POLLS + 1 <= spent <= POLLS + 10, spent
    finally:
        admin.dispose()
