"""Live keys on the metadata side: which keys a guest is served, and recording that it got them.

Which keys: ``servers/live_keys/delivery.py`` decides (``current``, ``next_expiry``) when a record
is read; the facts keep each served key's expiry, so a cached guest stops serving a key the moment
it expires without reading the database again (``GuestFacts.at``).

Recording: the API says a key is live only once the guest has it (``key_delivery``). The
metadata service sees two of the ways a guest gets it: cloud-init reading its boot set
(meta_data.json or the EC2 public-keys while ``keys_generation == keys_boot_generation``:
``metadata``), and sshd's ``AuthorizedKeysCommand`` fetching authorized_keys (``login-time
check``). Each worker writes at most once per guest and generation: it remembers the generation
it marked (or is marking) for each guest it marked lately, not only on the cached guest, since a
change replaces that copy with one read again, which may have been read before the mark
committed. A storm of logins thus costs one conditional UPDATE per guest and worker, not one per
login, batched in a few transactions; ``mark_applied`` itself never moves the state backwards.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.metadata.documents import GuestDocuments
from cloudseed.metadata.facts import GuestFacts, facts_from_record
from cloudseed.servers.live_keys import delivery as key_delivery
from cloudseed.servers.live_keys.delivery import VIA_LOGIN_CHECK, VIA_METADATA

log = logging.getLogger(__name__)

# Guests whose marked generation each worker remembers (the latest marked). A change is read
# twice in the process that made it (at commit, then from the feed), and a copy read while the
# mark was being written still shows the old applied generation: remembering the last few
# thousand marks covers those re-reads; a guest forgotten since costs one redundant UPDATE.
REMEMBERED_MARKS = 4096
# Seconds a batch's first mark waits for others. A batch's cost is mostly its own (a query for
# the guests' cells, a transaction per cell), and a boot storm's first key deliveries come a
# few per millisecond: written as soon as the previous batch ended, they made batches of a few
# guests each. Waiting this long made cold storms 5-8 % faster (bench/cold_storms.py;
# docs/benchmarks.md, issue 36). The API shows a delivery this much later.
MARK_WINDOW = 0.1

__all__ = ["VIA_LOGIN_CHECK", "VIA_METADATA", "Deliveries", "guest_facts", "posix_time"]


def posix_time(value: dt.datetime) -> float:
    """A naive UTC datetime (as the database and key_delivery keep times) as POSIX time."""
    return value.replace(tzinfo=dt.UTC).timestamp()


def guest_facts(record: Any, now: dt.datetime) -> GuestFacts:
    """The guest's facts from ``record`` (a servers.records.ServerRecord) at ``now`` (naive
    UTC): its current keys, in order, each with its expiry."""
    entries = [key_delivery.entry_defaults(e) for e in record.keypairs]
    served = [
        (e, posix_time(key_delivery.parse_time(e["expires_at"])) if e["expires_at"] else None)
        for e in key_delivery.current(entries, now)
    ]
    refresh = key_delivery.next_expiry(entries, now)
    return facts_from_record(
        record, keys=served, keys_refresh_at=posix_time(refresh) if refresh else None
    )


@dataclass(frozen=True, slots=True)
class _Mark:
    guest: GuestDocuments
    generation: int
    via: str


class Deliveries:
    """Records, for one worker, the key generations its guests got. Writes run in a thread,
    after the answer that delivered the keys was handed to the connection, and in batches:
    the marks that come in within ``window`` seconds of the first, or while the previous batch
    is written, make up the next (one query for their cells, one transaction per cell), so a
    boot storm's first reads cost a few transactions, not one per guest."""

    def __init__(self, cells: CellDatabases, *, window: float = MARK_WINDOW) -> None:
        self.cells = cells
        self.window = window
        self._queue: list[_Mark] = []
        self._writer: asyncio.Task[None] | None = None
        self._marked: OrderedDict[str, int] = OrderedDict()  # uuid -> generation, oldest first

    def wanted(self, guest: GuestDocuments, via: str) -> bool:
        """Whether sending ``guest`` its keys ``via`` this way would record anything."""
        facts = guest.facts
        generation = facts.keys_generation
        if guest.marked >= generation:
            return False  # this worker marked it (or the guest was known to hold it)
        if self._marked.get(facts.uuid, 0) >= generation:
            return False  # marked from an earlier copy of this guest
        # cloud-init applies keys once per instance: by metadata only the boot set counts.
        return via != VIA_METADATA or generation == facts.keys_boot_generation

    def served(self, guest: GuestDocuments, via: str) -> None:
        """``guest`` was just sent its keys ``via`` a way the metadata service sees."""
        if not self.wanted(guest, via):
            return
        generation = guest.facts.keys_generation
        guest.marked = generation
        self._remember(guest.facts.uuid, generation)
        self._queue.append(_Mark(guest, generation, via))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())

    async def _write_queued(self) -> None:
        while True:
            await asyncio.sleep(self.window)
            if not self._queue:
                return
            batch, self._queue = self._queue, []
            try:
                await asyncio.to_thread(self._write, batch)
            except Exception:
                log.exception("recording %d key deliveries failed", len(batch))
                for mark in batch:  # the next delivery tries again
                    if mark.guest.marked == mark.generation:
                        mark.guest.marked = mark.generation - 1
                    if self._marked.get(mark.guest.facts.uuid) == mark.generation:
                        del self._marked[mark.guest.facts.uuid]

    def _remember(self, uuid: str, generation: int) -> None:
        self._marked[uuid] = generation
        self._marked.move_to_end(uuid)
        if len(self._marked) > REMEMBERED_MARKS:
            self._marked.popitem(last=False)

    def _write(self, batch: list[_Mark]) -> None:
        by_uuid = {m.guest.facts.uuid: m for m in batch}  # the latest mark of each guest
        # Instances deleted meanwhile have no cell any more: nothing to record for them.
        for cell_id, uuids in self.cells.cells_of(by_uuid).items():
            self.cells.by_id(cell_id).run(partial(self._mark, by_uuid, uuids), write=True)

    @staticmethod
    def _mark(by_uuid: dict[str, _Mark], uuids: Iterable[str], session: Session) -> None:
        key_delivery.mark_many_applied(
            session,
            [
                (uuid, by_uuid[uuid].generation, by_uuid[uuid].via)
                for uuid in sorted(uuids)  # one lock order for every worker
            ],
        )

    async def aclose(self) -> None:
        """Write what is queued (before the databases are disposed of)."""
        while self._writer is not None and not self._writer.done():
            await self._writer
