"""The console mirror: the compute agent stores the end of each of its guests' consoles in the
cell database, where every API node reads it for ``os-getConsoleOutput``
(``servers/lifecycle/console_tails.py``).

Why the database, and not an endpoint on the agent that API nodes call: an agent host then
needs no inbound port, no listener of its own and no credentials for API nodes to present
(it shares only the database and the API's URLs with them, as for everything else), and a
console stays readable while its agent is down, which is when an operator most wants to read
it. The price is a write per changed console per interval, kept small:

- every ``[compute] console_tail_interval`` seconds (5) the mirror asks the driver for each
  guest's ``console_stamp`` (the qemu driver: one ``stat`` of the log), and reads and stores
  only the consoles whose stamp changed since it last stored them. A settled guest prints
  nothing, so it costs a stat per interval and no write; a booting one at most one write per
  interval, of at most 100 KiB compressed (a boot's console: about 6 KiB);
- the changed tails of one pass go to the database in transactions of ``BATCH``;
- at start the stored stamps are read once, so a restarted agent writes only what changed
  while it was away;
- one mirror per host: the agents of a host on one machine (a serve's workers) take an
  exclusive ``flock`` in the state directory, and only its holder mirrors.

A console is therefore at most about one interval old on an API node that does not run the
instance's host; a node that does answers from the driver, fresh. A deleted guest's tail goes
with its destroy (``steps.py``).
"""

from __future__ import annotations

import fcntl
import logging
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import Driver
from cloudseed.db.engines import Database
from cloudseed.periodic import Periodic
from cloudseed.servers.lifecycle import console_tails
from cloudseed.servers.models import Instance

log = logging.getLogger(__name__)

BATCH = 100  # tails written per transaction


@dataclass(frozen=True)
class _Tail:
    uuid: str
    output: bytes
    stamp: str


class ConsoleMirror:
    def __init__(
        self,
        cells: CellDatabases,
        *,
        host: str,
        driver: Driver,
        interval: float,
        lock_dir: Path,
    ) -> None:
        self.cells = cells
        self.host = host
        self.driver = driver
        self.interval = interval
        self.lock_path = lock_dir / f"console-mirror-{host}.lock"
        self._stored: dict[str, str] = {}  # uuid -> the stamp stored for it
        self._lock_fd: int | None = None
        self._loop = Periodic(
            self.run_once,
            interval=interval,
            name="cloudseed-consoles",
            failure=f"console mirror of {host}: pass failed",  # a database outage: next pass
        )

    def start(self) -> None:
        if self.interval > 0:
            self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def run_once(self) -> int:
        """One pass over the host's guests (when this agent is the host's mirror); how many
        tails were written."""
        if not self._is_the_mirror():
            return 0
        written = 0
        seen: set[str] = set()
        for cell in self.cells.all_cells():
            written += self._pass(cell, seen)
        for gone in set(self._stored) - seen:
            del self._stored[gone]
        return written

    def _pass(self, cell: Database, seen: set[str]) -> int:
        query = select(Instance.uuid).where(Instance.host == self.host, Instance.deleted == 0)
        with cell.read() as session:
            uuids = list(session.scalars(query))
            unknown = [u for u in uuids if u not in self._stored]
            if unknown:
                self._stored.update(console_tails.stamps_of(session, unknown))
        seen.update(uuids)
        changed: list[_Tail] = []
        for uuid in uuids:
            try:
                stamp = self.driver.console_stamp(uuid)
                if not stamp or stamp == self._stored.get(uuid):
                    continue
                output = console_tails.pack(self.driver.console_output(uuid))
            except Exception:  # one guest's console: the others still get theirs
                log.exception("console of %s could not be read", uuid)
                continue
            changed.append(_Tail(uuid, output, stamp))
        for start in range(0, len(changed), BATCH):
            batch = changed[start : start + BATCH]
            cell.run(partial(_store, batch=batch), write=True)
            for tail in batch:
                self._stored[tail.uuid] = tail.stamp
        return len(changed)

    def _is_the_mirror(self) -> bool:
        if self._lock_fd is not None:
            return True
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True


def _store(session: Session, *, batch: list[_Tail]) -> None:
    console_tails.store(session, [(tail.uuid, tail.output, tail.stamp) for tail in batch])
