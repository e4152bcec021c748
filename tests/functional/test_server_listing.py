"""The list filter ``status=X`` on every backend: it selects exactly the servers the API shows
with status X, whatever their task_state (a building server is BUILD in every task). The basic
list's narrow read (``list_server_names``) selects the same servers in the same order as the
full records' for every filter, page and marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.servers import states
from cloudseed.servers.listing import ListFilter, list_server_names, list_servers
from tests.support.instances import add_instance

# (vm_state, task_state) pairs as the agent and the API leave them, and one task the status
# map does not name (it shows its vm_state's own status).
STATES = [
    ("building", "scheduling"),
    ("building", "spawning"),
    ("building", None),
    ("active", None),
    ("active", "rebooting"),
    ("active", "rebooting_hard"),
    ("active", "rebuilding"),
    ("active", "powering-off"),
    ("stopped", None),
    ("stopped", "powering-on"),
    ("stopped", "rebuilding"),
    ("error", None),
    ("error", "rebuilding"),
]


@pytest.fixture()
def cells(api_db: Database, clean_cell_db: Database) -> Iterator[CellDatabases]:
    opened = CellDatabases(api_db)
    yield opened
    opened.dispose()


def test_status_filter_selects_what_the_api_shows(cells, clean_cell_db):
    shown: dict[str, str] = {}
    for vm_state, task_state in STATES:
        uid = add_instance(clean_cell_db, vm_state, task_state, name=f"{vm_state}-{task_state}")
        shown[uid] = states.status_of(vm_state, task_state)
    for status in [*sorted(set(shown.values())), "UNKNOWN-STATUS"]:
        for asked in (status, status.lower()):
            listed = list_servers(cells, ListFilter(project_id="p", status=asked))
            expected = {uid for uid, s in shown.items() if s == status}
            assert {r.instance.uuid for r in listed} == expected, asked
    building = list_servers(cells, ListFilter(project_id="p", status="BUILD"))
    assert len(building) == 3  # every task of a build, not only the untasked one
    active = list_servers(cells, ListFilter(project_id="p", status="ACTIVE"))
    assert {r.instance.display_name for r in active} == {"active-None", "active-powering-off"}


def test_basic_list_reads_the_servers_the_full_list_reads(cells, clean_cell_db):
    for index, (vm_state, task_state) in enumerate(STATES):
        add_instance(clean_cell_db, vm_state, task_state, name=f"{vm_state}-{index}")
    newest_first = [r.instance.uuid for r in list_servers(cells, ListFilter(project_id="p"))]
    assert len(newest_first) == len(STATES)
    filters = [
        ListFilter(project_id="p"),
        ListFilter(project_id=None, limit=4),
        ListFilter(project_id="p", limit=5, marker=newest_first[3]),
        ListFilter(project_id="p", name="^active", limit=2),
        ListFilter(project_id="p", name="stop", marker=newest_first[0]),
        ListFilter(project_id="p", status="BUILD", limit=2),
        ListFilter(project_id="p", status="nothing-has-it"),
        ListFilter(project_id="other"),
        ListFilter(project_id="p", limit=0),
    ]
    for f in filters:
        full = [(r.instance.uuid, r.instance.display_name) for r in list_servers(cells, f)]
        assert [(s.uuid, s.name) for s in list_server_names(cells, f)] == full, f
    assert [s.uuid for s in list_server_names(cells, filters[2])] == newest_first[4:9]
