"""Wake-ups for an agent whose database cannot push: another process's commits on SQLite.

PostgreSQL wakes an agent at once (NOTIFY); this process's own commits wake it through its
announcer. An agent beside an API node on one SQLite file (``cloudseed compute`` next to
``cloudseed serve --no-compute``) would otherwise find work, a guest's acknowledgement of a
notice included (2.111), only at its next ``[compute] poll_interval_ms``. Every ``INTERVAL``
the agent asks ``PRAGMA data_version`` (db/data_version.py: no query, no transaction) whether
another connection committed; only then it reads whether there is work for its host
(``queue.has_claimable``, one indexed read that takes no lock), and looks for it at once when
there is. An idle cloud costs nothing more; MariaDB has no such counter and keeps the poll.
"""

from __future__ import annotations

import logging

from cloudseed.cells.service import CellDatabases
from cloudseed.db.data_version import DataVersion
from cloudseed.db.engines import Database
from cloudseed.servers.lifecycle import queue

log = logging.getLogger(__name__)

INTERVAL = 0.05  # seconds


class CommitWatch:
    def __init__(self, cells: CellDatabases, *, host: str) -> None:
        self.host = host
        self._probes: list[tuple[Database, DataVersion]] = []
        for cell in cells.all_cells():
            probe = DataVersion.of(cell.engine)
            if probe is not None:
                self._probes.append((cell, probe))

    @property
    def interval(self) -> float | None:
        """How often to ask (None: never, no cell is SQLite)."""
        return INTERVAL if self._probes else None

    def work_waiting(self) -> bool:
        """Whether another connection committed work for this host since the last ask."""
        for cell, probe in self._probes:
            if not probe.changed():
                continue
            try:
                with cell.read() as session:
                    if queue.has_claimable(session, host=self.host):
                        return True
            except Exception:  # the next poll looks anyway
                log.exception("agent of %s: looking for work failed", self.host)
        return False

    def close(self) -> None:
        for _cell, probe in self._probes:
            probe.close()
        self._probes.clear()
