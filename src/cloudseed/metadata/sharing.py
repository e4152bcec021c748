"""One copy of equal values that many cached guests hold. IO-free.

A metadata worker holds thousands of guests, and the guests of one boot storm are mostly
alike: an autoscaling group's servers carry the same user data, the same metadata items and
key, one multi-create's reservation id. Each guest's facts are read from its own database
rows, so without this every guest would hold its own copy of each (issue 19: about 1 KiB of
the budget of 5 KiB per cached guest, measured by bench/guest_memory.py).

``sys.intern`` serves short strings (facts.py); it cannot take tuples or bytes, and interned
strings are immortal on some Pythons (3.12), which a user data's worth of text must not be.
A ``Sharing`` table holds a strong reference to each value it has handed out, so it is
bounded twice: values larger than ``largest`` bytes (with what a tuple or a slotted
dataclass holds) are never kept (they are returned as given), and a full table is emptied
(guests already loaded keep their copies; sharing starts again from the next load). What it
can keep alive after its guests are gone is therefore at most ``entries`` values of
``largest`` bytes.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable
from typing import TypeVar

T = TypeVar("T", bound=Hashable)


class Sharing:
    def __init__(self, *, entries: int, largest: int) -> None:
        self._entries = entries
        self._largest = largest
        # Keyed by type too: 1 == True and b"a" == "a" must not hand one out for the other.
        self._values: dict[tuple[type, Hashable], Hashable] = {}

    def __call__(self, value: T) -> T:
        """The copy of ``value`` this table hands out (``value`` itself the first time, and
        when it is too large to keep)."""
        key = (type(value), value)
        found = self._values.get(key)
        if found is not None:
            return found  # type: ignore[return-value]  # keyed by its type: a T
        # Sized only when new: a storm's guests mostly find their values here already, and
        # the walk cost a fifth of a guest's load.
        if _size(value) > self._largest:
            return value
        if len(self._values) >= self._entries:
            self._values.clear()
        self._values[key] = value
        return value

    def __len__(self) -> int:
        return len(self._values)


def _size(value: object) -> int:
    """Bytes of ``value`` with the tuples and dataclasses in it (what keeping it keeps)."""
    size = sys.getsizeof(value)
    kind = type(value)
    if kind in _FLAT:
        return size
    if isinstance(value, tuple):
        return size + sum(_size(item) for item in value)
    names = _field_names(kind)
    if names:
        size += sum(_size(getattr(value, name)) for name in names)
    return size


# What holds nothing else worth counting: most values shared are these, or tuples of them.
_FLAT = frozenset({str, bytes, int, float, bool, type(None)})


# A type's dataclass field names (empty for any other type), looked up once per type.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        fields = dataclasses.fields(kind) if dataclasses.is_dataclass(kind) else ()
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields)
    return names
