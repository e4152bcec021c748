"""The token-less access audit (2.109): per server, the metadata requests made without a
session token, and among them the reads of its user data and of its password, so an operator
finds the guests that would break before requiring tokens (EC2's ``MetadataNoToken``).

The hot path only counts, in memory, on the event loop: a dict entry per server, two
additions, a clock reading (``counted``; no lock: the flush thread takes the counts by asking
the loop to swap them out). A ``Periodic`` thread hands what each worker counted to the cell
databases every ``[metadata] access_audit_interval`` seconds (``store.add_counts``: one
UPDATE per server counted in the interval, in one transaction per cell), and once more when
the service stops. A worker killed in between loses at most one interval's counts; a cell it
cannot write keeps its counts for the next pass. ``AccessStats`` tells metrics/ the same
counts by project and document (never by server or path).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Protocol, TypeVar

from sqlalchemy.exc import IntegrityError

from cloudseed.cells.service import CellDatabases
from cloudseed.metadata import tree
from cloudseed.metadata.facts import GuestFacts
from cloudseed.periodic import Periodic
from cloudseed.servers.metadata_options import store
from cloudseed.servers.metadata_options.store import Counts

log = logging.getLogger(__name__)

# How long a flush waits for the loop to hand over its counts (a loop this busy is stuck).
LOOP_TIMEOUT = 30
T = TypeVar("T")

# The document label of the audit's metric: what a token-less request read.
USER_DATA, PASSWORD, OTHER = "user_data", "password", "other"


def document_of(kind: str, method: str) -> str:
    """What a request of ``kind`` (metadata/tree.py) and ``method`` read, for the audit."""
    if kind == tree.USER_DATA or kind == tree.EC2_USER_DATA:
        return USER_DATA
    if kind == tree.PASSWORD and method != "POST":
        return PASSWORD
    return OTHER


class AccessStats(Protocol):
    def tokenless(self, project_id: str, document: str) -> None:
        """A guest of ``project_id`` asked for ``document`` without a session token."""


class NoAccessStats:
    def tokenless(self, project_id: str, document: str) -> None:
        pass


NO_ACCESS_STATS = NoAccessStats()


class _Pending:
    """One server's counts since the last flush; times as POSIX seconds."""

    __slots__ = (
        "password",
        "password_at",
        "project_id",
        "tokenless",
        "tokenless_at",
        "user_data",
        "user_data_at",
    )

    def __init__(self, project_id: str) -> None:
        self.project_id = project_id
        self.tokenless = self.user_data = self.password = 0
        self.tokenless_at = self.user_data_at = self.password_at = 0.0

    def add(self, other: _Pending) -> None:
        self.tokenless += other.tokenless
        self.user_data += other.user_data
        self.password += other.password
        self.tokenless_at = max(self.tokenless_at, other.tokenless_at)
        self.user_data_at = max(self.user_data_at, other.user_data_at)
        self.password_at = max(self.password_at, other.password_at)

    def counts(self) -> Counts:
        return Counts(
            project_id=self.project_id,
            tokenless=self.tokenless,
            tokenless_at=_utc(self.tokenless_at),
            user_data=self.user_data,
            user_data_at=_utc(self.user_data_at),
            password=self.password,
            password_at=_utc(self.password_at),
        )


def _utc(seconds: float) -> dt.datetime | None:
    """POSIX seconds as the naive UTC the databases keep (0: never)."""
    if not seconds:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)


class AccessAudit:
    def __init__(
        self,
        cells: CellDatabases,
        *,
        interval: float,
        stats: AccessStats = NO_ACCESS_STATS,
    ) -> None:
        self.cells = cells
        self.stats = stats
        # Counted on the loop (``counted``), taken and put back on it too (``_take``).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[str, _Pending] = {}
        self._periodic = Periodic(
            self.flush,
            interval=interval,
            name="metadata-access-audit",
            failure="recording token-less metadata access failed",
            first_pass_at_once=False,
        )

    def start(self) -> None:
        """Start flushing (on the event loop that will count)."""
        self._loop = asyncio.get_running_loop()
        self._periodic.start()

    def close(self) -> None:
        """Stop the thread and write what is left (blocking: call it in a thread, while the
        loop runs)."""
        self._periodic.stop()
        self.flush()

    def counted(self, facts: GuestFacts, document: str) -> None:
        """The guest of ``facts`` asked for ``document`` without a session token."""
        now = time.time()
        uuid = facts.uuid
        pending = self._pending.get(uuid)
        if pending is None:
            pending = self._pending[uuid] = _Pending(facts.project_id)
        pending.tokenless += 1
        pending.tokenless_at = now
        if document == USER_DATA:
            pending.user_data += 1
            pending.user_data_at = now
        elif document == PASSWORD:
            pending.password += 1
            pending.password_at = now
        self.stats.tokenless(facts.project_id, document)

    def flush(self) -> None:
        """Add what was counted since the last flush to the cell databases (in a thread)."""
        batch = self._on_loop(self._take)
        if not batch:
            return
        try:
            # Servers deleted meanwhile have no cell any more: their last counts go with them.
            by_cell = self.cells.cells_of(batch)
        except Exception:
            self._put_back(batch)
            raise
        for cell_id, uuids in by_cell.items():
            counts = {uuid: batch[uuid].counts() for uuid in uuids}
            try:
                self.cells.by_id(cell_id).run(
                    partial(store.add_counts, counts=counts),
                    write=True,
                    lost_to=(IntegrityError,),
                )
            except Exception:
                log.exception("recording token-less access of %d servers failed", len(uuids))
                self._put_back({uuid: batch[uuid] for uuid in uuids})

    def _take(self) -> dict[str, _Pending]:
        batch, self._pending = self._pending, {}
        return batch

    def _put_back(self, batch: dict[str, _Pending]) -> None:
        """Counts a flush could not write, kept for the next one."""

        def merge() -> None:
            for uuid, pending in batch.items():
                current = self._pending.get(uuid)
                if current is None:
                    self._pending[uuid] = pending
                else:
                    current.add(pending)

        self._on_loop(merge)

    def _on_loop(self, work: Callable[[], T]) -> T:
        """``work()`` run on the counting loop, from the flush thread: the counts are only ever
        touched there. Without a running loop (never started, or stopped) in this thread."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return work()

        async def run() -> T:
            return work()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=LOOP_TIMEOUT)
