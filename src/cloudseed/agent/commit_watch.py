"""Prompt wake-ups on SQLite while a notice waits for its guest's acknowledgement (2.111).

PostgreSQL wakes an agent at once (NOTIFY); this process's own commits wake it through its
announcer. An agent beside an API node on one SQLite file (``cloudseed compute`` next to
``cloudseed serve --no-compute``) would otherwise hear of an acknowledgement taken by the API
node's metadata service only at its next ``[compute] poll_interval_ms`` (1 s by default), and
issue 35 wants the operation started within a second of it. So while an operation of its host
waits for a notice (``queue.has_waiting_notice``, asked in each claim's transaction), the agent
asks every ``INTERVAL`` whether another connection committed (``PRAGMA data_version``,
db/data_version.py: no query, no transaction) and only then reads whether there is work for
it (``queue.has_claimable``, one indexed read that takes no lock). Without a notice waiting it
does nothing of the sort; MariaDB has no such counter and keeps the poll.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from cloudseed.db.data_version import DataVersion
from cloudseed.db.engines import Database
from cloudseed.servers.lifecycle import queue

log = logging.getLogger(__name__)

INTERVAL = 0.05  # seconds


class CommitWatch:
    def __init__(self, *, host: str) -> None:
        self.host = host
        # The SQLite cells a notice of this host waits in, by id: the database and its probe
        # (made then, kept until ``close``).
        self._probes: dict[int, tuple[Database, DataVersion]] = {}
        self._armed: set[int] = set()

    def arm(self, cell: Database, session: Session) -> None:
        """After a claim in ``cell`` (``session``, its transaction): watch it while a notice
        of this host waits there. Nothing for a cell that is not SQLite."""
        if cell.engine.dialect.name != "sqlite":
            return
        if not queue.has_waiting_notice(session, host=self.host):
            self._armed.discard(id(cell))
            return
        if id(cell) not in self._probes:
            probe = DataVersion.of(cell.engine)
            if probe is None:  # in memory: no other process shares it
                return
            self._probes[id(cell)] = (cell, probe)
        self._armed.add(id(cell))

    @property
    def interval(self) -> float | None:
        """How often to ask (None: not now, no notice waits in a SQLite cell)."""
        return INTERVAL if self._armed else None

    def work_waiting(self) -> bool:
        """Whether another connection committed work for this host since the last ask."""
        for key in list(self._armed):
            cell, probe = self._probes[key]
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
        for _cell, probe in self._probes.values():
            probe.close()
        self._probes.clear()
        self._armed.clear()
