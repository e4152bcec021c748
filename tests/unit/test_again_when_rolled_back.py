"""``again_when_rolled_back``'s ``lost_to``: a caller's own "a concurrent transaction won"
errors run the transaction again, and the last one is raised as it is."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudseed.db.engines import again_when_rolled_back
from cloudseed.errors import Conflict


class Lost(Conflict):
    pass


def losing(times: int) -> tuple[list[int], Callable[[], str]]:
    runs: list[int] = []

    def transaction() -> str:
        runs.append(len(runs) + 1)
        if len(runs) <= times:
            raise Lost("a concurrent transaction took it first")
        return "done"

    return runs, transaction


def test_run_again_until_it_wins() -> None:
    runs, transaction = losing(2)
    assert again_when_rolled_back(transaction, attempts=3, lost_to=(Lost,)) == "done"
    assert runs == [1, 2, 3]


def test_the_last_loss_is_raised_as_it_is() -> None:
    runs, transaction = losing(5)
    with pytest.raises(Lost, match="took it first"):
        again_when_rolled_back(transaction, attempts=3, lost_to=(Lost,))
    assert runs == [1, 2, 3]


def test_other_errors_are_not_run_again() -> None:
    runs, transaction = losing(1)
    with pytest.raises(Lost):
        again_when_rolled_back(transaction, attempts=3)
    assert runs == [1]
