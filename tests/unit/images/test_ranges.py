"""The one byte range of an image download, as Glance reads ``Range`` (images/ranges.py)."""

from __future__ import annotations

import pytest

from cloudseed.images.ranges import byte_range
from cloudseed.web.errors import RangeNotSatisfiable


@pytest.mark.parametrize(
    ("header", "wanted"),
    [
        (None, None),
        ("bytes=0-", (0, 100)),
        ("bytes=10-19", (10, 20)),
        ("bytes=90-500", (90, 100)),  # cut to the end
        ("bytes=99-99", (99, 100)),
        ("bytes=-1", (99, 100)),
        ("bytes=-500", (0, 100)),  # more than there is: all of it
        (" bytes = 5 - 6 ", (5, 7)),
    ],
)
def test_ranges_served(header: str | None, wanted: tuple[int, int] | None) -> None:
    assert byte_range(header, 100) == wanted


@pytest.mark.parametrize(
    "header",
    [
        "bytes=100-",
        "bytes=200-300",
        "bytes=9-2",
        "bytes=-0",
        "bytes=-",
        "bytes=0-1,5-6",
        "items=0-1",
        "bytes=a-b",
        "",
        "bytes=" + "9" * 30 + "-",
    ],
)
def test_ranges_refused(header: str) -> None:
    with pytest.raises(RangeNotSatisfiable) as refused:
        byte_range(header, 100)
    assert refused.value.size == 100


def test_nothing_to_serve_of_empty_data() -> None:
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=-5", 0)
    with pytest.raises(RangeNotSatisfiable):
        byte_range("bytes=0-", 0)
