"""The ``Range`` header of an image download (IO-free), as Glance reads it: one byte range,
``bytes=FIRST-LAST``, ``bytes=FIRST-`` (to the end) or ``bytes=-N`` (the last N bytes).

Glance answers a range it cannot serve with 416; so does cloudseed, also for several ranges
(``bytes=0-1,5-6``: Glance's webob parses those as malformed), and for a range that starts past
the data. A LAST past the end is cut to the end (RFC 9110). Compute agents resume a download
cut short with ``bytes=<bytes they have>-``.
"""

from __future__ import annotations

import re

from cloudseed.web.errors import RangeNotSatisfiable

_RANGE = re.compile(r"bytes=(\d{0,19})-(\d{0,19})")


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end) with ``end`` exclusive of the data of ``size`` bytes that ``header``
    asks for; None for the whole (no header). RangeNotSatisfiable otherwise."""
    if header is None:
        return None
    found = _RANGE.fullmatch(header.strip().replace(" ", ""))
    if found is None:
        raise RangeNotSatisfiable(size)
    first, last = found.groups()
    if not first and not last:
        raise RangeNotSatisfiable(size)
    if not first:  # the last N bytes
        count = int(last)
        if count == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        return max(0, size - count), size
    start = int(first)
    end = size if not last else min(int(last) + 1, size)
    if start >= size or (last and int(last) < start):
        raise RangeNotSatisfiable(size)
    return start, end
