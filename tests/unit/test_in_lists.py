"""db/in_lists.py: the few sizes an IN list is padded to."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cloudseed.db.in_lists import STEP, padded


def test_small_lists_are_left_as_they_are():
    assert padded([]) == []
    assert padded(["a"]) == ["a"]
    assert padded(("a", "b")) == ["a", "b"]


def test_the_last_value_fills_up_to_the_next_power_of_two():
    assert padded([1, 2, 3]) == [1, 2, 3, 3]
    assert padded(range(5)) == [0, 1, 2, 3, 4, 4, 4, 4]
    assert len(padded(range(STEP))) == STEP
    assert len(padded(range(STEP + 1))) == 2 * STEP
    assert len(padded(range(5 * STEP - 3))) == 5 * STEP


@given(st.lists(st.integers(), max_size=3 * STEP))
def test_padding_keeps_the_values_and_order_and_adds_only_the_last(values):
    result = padded(values)
    assert result[: len(values)] == values
    assert set(result[len(values) :]) <= set(values[-1:])
    assert len(result) < 2 * len(values) or len(values) <= 1
    assert len(result) - len(values) < STEP


def test_few_sizes_cover_every_batch():
    sizes = {len(padded(range(n))) for n in range(2, 3 * STEP + 1)}
    assert sizes == {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072}
