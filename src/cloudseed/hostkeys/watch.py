"""The console fallback: the compute agent reads the host keys cloud-init printed to a guest's
console when the guest did not phone home.

Why the agent, and not the API on a read: the console log is a file on the instance's compute
host, which its agent reads fresh (API nodes see only the tail the agent stores every few
seconds, ``agent/console_mirror.py``), while a report stored in the cell database is seen by
every API node, by ``cloudseed known-hosts`` and by the identity token alike.

Every ``interval`` seconds the watch asks the cells for the running instances of its host that
were launched (built or rebuilt) within ``window`` and whose current boot generation has no
accepted report yet, reads each one's console tail from the driver, and takes the last
``-----BEGIN SSH HOST KEY KEYS-----`` block (``console.py``). The console log is appended
across rebuilds, so right after a rebuild its last block is the previous disk's. Hence the
baseline: the last block seen when a generation is first looked at belongs to the past (stored,
role ``baseline``; when there is none, this watch remembers that in memory, so a console
without blocks never costs a write), and only a different block seen later is accepted as the
generation's keys. A generation first looked at after its guest printed (the agent was down
during the boot) therefore gets no console keys: a missing answer, never a wrong one.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.hostkeys import service
from cloudseed.hostkeys.console import last_block
from cloudseed.hostkeys.key_lines import HostKey, same_keys
from cloudseed.periodic import Periodic

log = logging.getLogger(__name__)

INTERVAL = 3.0  # seconds; a guest prints its keys at least ~10 s after it was started
WINDOW = dt.timedelta(hours=1)  # cloud-init prints them once, during the first minutes
PER_ROUND = 50  # instances looked at per cell and round, the newest first

Generation = tuple[str, dt.datetime]


class ConsoleWatch:
    def __init__(
        self,
        cells: CellDatabases,
        *,
        host: str,
        console_output: Callable[[str], str],
        interval: float = INTERVAL,
        window: dt.timedelta = WINDOW,
    ) -> None:
        self.cells = cells
        self.host = host
        self.console_output = console_output
        self.interval = interval
        self.window = window
        self._empty_at_first_look: set[Generation] = set()
        self._loop = Periodic(
            self.run_once,
            interval=interval,
            name="cloudseed-hostkeys",
            failure=f"host key console watch of {host}: round failed",  # next round tries again
            first_pass_at_once=False,
        )

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def run_once(self) -> int:
        """One round over every cell; how many console reports were accepted."""
        accepted = 0
        awaited: set[Generation] = set()
        since = utcnow() - self.window
        for cell in self.cells.all_cells():
            with cell.read() as session:
                watched = service.awaiting_console(
                    session, host=self.host, since=since, limit=PER_ROUND
                )
            for one in watched:
                awaited.add((one.uuid, one.launched_at))
                accepted += self._look(cell, one)
        self._empty_at_first_look &= awaited  # forget generations no longer awaited
        return accepted

    def _look(self, cell: Database, one: service.Watched) -> int:
        generation = (one.uuid, one.launched_at)
        try:
            text = self.console_output(one.uuid)
        except Exception:  # no console (yet), or the driver cannot tell: look again later
            log.debug("cannot read the console of %s", one.uuid, exc_info=True)
            return 0
        block = last_block(text) or ()
        if generation in self._empty_at_first_look:
            past: tuple[HostKey, ...] = ()  # this watch saw the console without a block
        elif one.baseline is not None:
            past = one.baseline
        else:  # the first look at this generation
            if not block:
                self._empty_at_first_look.add(generation)
                return 0
            cell.run(
                lambda session: service.record_console(
                    session, one.uuid, launched_at=one.launched_at, keys=block, baseline=True
                ),
                write=True,
            )
            return 0
        if not block or same_keys(block, past):
            return 0
        stored = cell.run(
            lambda session: service.record_console(
                session, one.uuid, launched_at=one.launched_at, keys=block, baseline=False
            ),
            write=True,
        )
        if stored:
            log.info("host keys of %s taken from its console", one.uuid)
        return int(stored)
