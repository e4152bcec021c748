"""IN lists in a few sizes, so that a batch's statements are prepared once, not per size.

SQLAlchemy renders an expanding parameter (``column.in_(bindparam(..., expanding=True))``)
as one placeholder per value, so a statement run for batches of 1 to 200 values is 200
different SQL texts. Each database prepares and keeps every one: Python's sqlite3 module holds
up to 128 prepared statements per connection, and one with a 200-value IN list is tens of
KiB of SQLite's memory (a metadata worker's guest loads left 11-15 MiB of them behind, about
1.3 KiB per guest of a 10,000-guest storm); psycopg prepares a text run five times on the
server. Padding each list to the next of a few sizes, with its last value repeated (an IN
list's duplicates change nothing it matches), leaves a handful of texts per statement.
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
