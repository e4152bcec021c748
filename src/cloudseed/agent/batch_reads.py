"""The records of the builds an agent claimed together, read in one transaction.

Each build read its instance's record (six queries) in a read transaction of its own. The
builds of one claim share a ``BatchRecords``: the first of them to need its record reads all
of theirs at once (``records.load_live``), the others take theirs from it. The records are only
read from (a build applies nothing of its payload to them), so threads may share them.
"""

from __future__ import annotations

import threading

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.db.engines import Database
from cloudseed.servers import records
from cloudseed.servers.lifecycle import queue


class BatchRecords:
    def __init__(self, cell: Database, uuids: list[str]) -> None:
        self._cell = cell
        self._uuids = uuids
        self._records: dict[str, records.ServerRecord] | None = None
        self._lock = threading.Lock()

    def get(self, uuid: str) -> records.ServerRecord:
        """``uuid``'s record (InstanceNotFound when it is gone or deleted). A failed read is
        not kept: the next build to ask reads again."""
        with self._lock:
            if self._records is None:
                with self._cell.read() as session:
                    loaded = records.load_live(session, self._uuids)
                self._records = {r.instance.uuid: r for r in loaded}
            found = self._records.get(uuid)
        if found is None:
            raise InstanceNotFound(uuid)
        return found


def batch_of(claimed: list[queue.Claimed], cell: Database) -> BatchRecords | None:
    """For the builds among operations claimed together (None when there are fewer than two)."""
    builds = [op.instance_uuid for op in claimed if op.kind == "build"]
    return BatchRecords(cell, builds) if len(builds) > 1 else None
