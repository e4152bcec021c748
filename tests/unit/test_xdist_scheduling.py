"""make test's scheduling (tests/support/scheduling.py): which tests share a work unit."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support.scheduling import (
    START_FIRST,
    SharedDeployments,
    slowest_first,
    starts_first,
)

DROPIN = "tests/compat/test_nova_dropin.py"


def scope(nodeid: str) -> str:
    # _split_scope reads nothing of the scheduler's state: no worker nodes are needed.
    scheduler = object.__new__(SharedDeployments)
    return str(scheduler._split_scope(nodeid))


def test_a_costly_deployments_tests_share_one_unit_per_parameter() -> None:
    sqlite = {scope(f"{DROPIN}::test_{name}[sqlite]") for name in ("a", "b", "c")}
    postgresql = {scope(f"{DROPIN}::test_{name}[postgresql]") for name in ("a", "b")}
    assert len(sqlite) == 1 and len(postgresql) == 1
    assert sqlite != postgresql
    assert scope(f"{DROPIN}::test_a") == scope(f"{DROPIN}::test_b") == DROPIN


def test_every_other_test_is_a_unit_of_its_own() -> None:
    ids = [
        "tests/functional/test_x.py::test_a[sqlite]",
        "tests/functional/test_x.py::test_b[sqlite]",
        "tests/functional/test_x.py::TestY::test_c",
        "tests/unit/test_z.py::test_d",
    ]
    assert [scope(nodeid) for nodeid in ids] == ids


def test_the_slowest_tests_start_first_and_the_rest_keep_their_order() -> None:
    """What tests/conftest.py does to the collection: the START_FIRST modules' tests move to
    the front, in their order, and every other test keeps its place."""
    slow = sorted(START_FIRST)
    ids = [
        "tests/compat/test_a.py::test_1",
        f"{slow[0]}::test_2[sqlite]",
        "tests/e2e/test_b.py::test_3",
        f"{slow[-1]}::test_4",
        "tests/e2e/test_b.py::test_5",
        f"{slow[0]}::test_6[postgresql]",
        "tests/unit/test_c.py::test_7",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    slowest_first(items)
    assert [item.nodeid for item in items] == [
        ids[1],
        ids[3],
        ids[5],
        ids[0],
        ids[2],
        ids[4],
        ids[6],
    ]
    assert all(starts_first(nodeid) for nodeid in (ids[1], ids[3], ids[5]))
