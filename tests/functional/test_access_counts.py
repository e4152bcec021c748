"""The token-less access audit's counts as the cell databases keep them
(``metadata_options.store.add_counts``): a flush of many servers adds to what is stored, new
servers get their row, times only move forward and a flush that did not see a kind of read
keeps its time. On every backend."""

from __future__ import annotations

import datetime as dt
import uuid as uuids

import pytest

from cloudseed.db.engines import Database
from cloudseed.servers.metadata_options import store
from cloudseed.servers.metadata_options.store import Counts

pytestmark = pytest.mark.databases

EARLY = dt.datetime(2026, 11, 29, 5, 0, 0, 123456)
LATE = EARLY + dt.timedelta(minutes=5)


def test_a_flush_of_many_servers_adds_to_the_stored_counts(clean_cell_db: Database) -> None:
    # More servers than one IN list holds, in two flushes: the first inserts them all, the
    # second updates all but one and inserts that one.
    servers = [str(uuids.uuid4()) for _ in range(1_201)]
    first = {
        u: Counts("p1", tokenless=2, tokenless_at=LATE, user_data=1, user_data_at=LATE)
        for u in servers[:-1]
    }
    clean_cell_db.run(lambda s: store.add_counts(s, first), write=True)
    second = {
        u: Counts("p1", tokenless=3, tokenless_at=EARLY, password=1, password_at=EARLY)
        for u in servers
    }
    clean_cell_db.run(lambda s: store.add_counts(s, second), write=True)

    def read(uuid: str) -> Counts | None:
        return clean_cell_db.run(lambda s: store.access_of(s, uuid))

    both = read(servers[0])
    assert both == Counts(
        "p1",
        tokenless=5,
        tokenless_at=LATE,  # the earlier time of the second flush does not move it back
        user_data=1,
        user_data_at=LATE,  # the second flush saw no user data read: the time stays
        password=1,
        password_at=EARLY,  # none stored before: the flush's
    )
    assert read(servers[-1]) == Counts(
        "p1", tokenless=3, tokenless_at=EARLY, password=1, password_at=EARLY
    )
    assert read(str(uuids.uuid4())) is None
