"""IN lists in a few sizes, so that a batch's statements are prepared once, not per size.

SQLAlchemy renders an expanding parameter (``column.in_(bindparam(..., expanding=True))``)
as one placeholder per value, so a statement run for batches of 1 to 200 values is 200
different SQL texts. Each database prepares and keeps every one: Python's sqlite3 module holds
up to 128 prepared statements per connection, and one with a 200-value IN list is tens of
KiB of SQLite's memory (after a 10,000-guest storm, SQLite held 12.6-13.3 MB in a metadata
worker without the padding, 8.3-9.4 with it: docs/benchmarks.md, issue 36, session 9);
psycopg prepares a text run five times on the server. Padding each list to the next of a few
sizes, with its last value repeated (an IN list's duplicates change nothing it matches),
leaves a handful of texts per statement.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")

# Below this, powers of two (1, 2, 4, ... 1024); from it on, multiples of it: a list is never
# padded by more than itself, nor by more than STEP values.
STEP = 1024


def padded(values: Iterable[T]) -> list[T]:
    """``values`` as a list whose length is one of the few sizes (unchanged when empty)."""
    listed = list(values)
    count = len(listed)
    if count <= 1:
        return listed
    size = 1 << (count - 1).bit_length() if count <= STEP else -(-count // STEP) * STEP
    listed.extend([listed[-1]] * (size - count))
    return listed
