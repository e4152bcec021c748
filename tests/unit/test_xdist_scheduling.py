"""make test's scheduling (tests/support/scheduling.py): which tests share a work unit."""

from __future__ import annotations

from tests.support.scheduling import SharedDeployments

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
