"""Which cell holds an instance (the API database's ``instance_mappings``), read for a whole
batch of instances in one statement and kept a short while, so that loading instances costs
no API-database round trip when their mappings were read lately.

A mapping changes when its instance moves to another cell (a cross-cell resize flips
``cell_id``; both cells' rows are saved, moving their ``updated_at``) and goes away when a
deleted instance is archived. How a change is still honoured:

- every change the watch reports for an instance (changes.py, any cell, any signal: a save,
  a delete) forgets its mapping, and a watch that failed forgets them all, so the load that
  follows a change reads the mapping anew;
- a mapping read before its instance's change was heard is not kept (a generation count:
  the read may have found the mapping from before the change);
- a cached mapping whose cell has no live instance of that uuid is read again within the
  same load (loading.py), so a move or a delete the watch has not reported yet never answers
  "no such instance" from an old mapping;
- and none is kept longer than ``ttl`` seconds whatever happens.

Only mappings that name a cell are kept: one without a cell (not scheduled yet, or in cell0)
or no row at all (Nova then reads ``[database] connection``) is read again every time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

TTL = 60.0  # seconds a mapping is kept at most


class InstanceMappings:
    """uuid -> cell id, thread-safe (loads run in worker threads, forgets on the loop)."""

    def __init__(self, *, ttl: float = TTL, size: int = 100_000) -> None:
        self.ttl = ttl
        self.size = size
        self._cells: dict[str, tuple[int, float]] = {}  # uuid -> (cell id, until)
        self._lock = threading.Lock()
        self._generation = 0  # forgets so far
        self._forgotten: dict[str, int] = {}  # uuid -> the generation that forgot it last
        self._floor = 0  # reads handed out before this generation are not kept at all
        self.hits = 0  # mappings answered from here (a count for tests and the bench)

    def cached(self, uuids: Iterable[str]) -> tuple[dict[str, int], list[str], int]:
        """(the cell ids known of ``uuids``, the uuids to read, the generation to hand
        ``remember`` with what is read)."""
        now = time.monotonic()
        known: dict[str, int] = {}
        unknown: list[str] = []
        with self._lock:
            for uuid in uuids:
                entry = self._cells.get(uuid)
                if entry is not None and now < entry[1]:
                    known[uuid] = entry[0]
                else:
                    unknown.append(uuid)
            self.hits += len(known)
            return known, unknown, self._generation

    def remember(self, cells: dict[str, int], generation: int) -> None:
        """Keep ``cells`` (read from the API database) but those forgotten since
        ``generation`` was handed out."""
        if not cells:
            return
        until = time.monotonic() + self.ttl
        with self._lock:
            if generation < self._floor:
                return
            if len(self._cells) + len(cells) > self.size:
                self._cells.clear()  # bounded; rebuilt by the next loads
            for uuid, cell_id in cells.items():
                if self._forgotten.get(uuid, -1) <= generation:
                    self._cells[uuid] = (cell_id, until)

    def forget(self, uuids: Iterable[str]) -> None:
        with self._lock:
            self._generation += 1
            if len(self._forgotten) >= self.size:  # bounded: every read so far is refused
                self._forgotten.clear()
                self._floor = self._generation
            for uuid in uuids:
                self._cells.pop(uuid, None)
                self._forgotten[uuid] = self._generation

    def forget_all(self) -> None:
        with self._lock:
            self._generation += 1
            self._floor = self._generation
            self._forgotten.clear()
            self._cells.clear()

    def __len__(self) -> int:
        return len(self._cells)
