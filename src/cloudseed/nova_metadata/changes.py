"""Which instances Nova changed, read from Nova's own timestamps: each worker polls every
cell database (every ``[cloudseed_metadata] change_poll_interval_ms``, 500 ms by default) and
its store drops what changed, so a change made through Nova's API reaches guests within
about half a second, where Nova's metadata API serves for up to ``[api]
metadata_cache_expiration`` (15 s) what it had cached.

What Nova's changes stamp (measured with Nova 34's objects, tests/compat/):

- ``instances.updated_at`` moves with every ``Instance.save()`` that touches the instance,
  its metadata items or its system metadata: a rebuild (new key, user data), metadata set,
  a password set or reset, a hostname change, every state change; it is indexed
  (``instances_updated_at_project_id_idx``), so this, the busiest signal, costs an index
  range scan.
- ``instances.deleted_at``: a delete (``Instance.destroy``) soft-deletes the row without
  touching ``updated_at``.
- ``instance_metadata.deleted_at``: deleting one metadata item (``DELETE
  /servers/{id}/metadata/{key}``) soft-deletes its row and touches nothing else.
- Rarely alone, so read every tenth poll (5 s): ``instance_extra.updated_at`` (device tags of
  an interface attached, a save that changes only extra columns), ``instance_info_caches
  .updated_at`` (Neutron's port events refresh it), and the block device mappings
  (``created_at``, ``updated_at``, ``deleted_at``: volumes attached and detached).

Only the first is indexed; the others are scans of their tables (no index can be added to
Nova's schema), which is what the idle cost measured in docs/nova-dropin.md is made of. On
SQLite a poll first asks ``PRAGMA data_version`` (db/data_version.py) and reads nothing when
no other connection has committed. Each poll is one statement per cell (a UNION of the
columns due).

Timestamps are the writers' clocks (every Nova host's) and a transaction may commit after
rows stamped later: each column is read from its highest stamp seen minus ``LOOKBACK``
seconds, and a row is reported once per (instance, stamp) once its stamp is more than
``SETTLE`` seconds old by this host's clock. Until then it is reported at every poll: Nova's
MySQL/MariaDB columns hold whole seconds, so two changes of one instance within a second
carry the same stamp, and only a stamp that is over can be known to have no more changes
coming (a changed instance is thus dropped from the cache for a few polls; a writer whose
clock runs more than SETTLE ahead of this host's would shorten that). A stamp with a fraction
of a second (PostgreSQL's and SQLite's columns keep microseconds) is reported once: a second
change carries another stamp. Stamps more than ``HISTORY`` older than the watch's start are
never reported: every load reads them, and a first poll that re-read them dropped each guest
just loaded ahead.

Besides dropping, the instances reported by any signal but ``instances.deleted_at`` are handed
to ``ahead`` once per poll: they are being built or changed now, and their guests are likely
to ask soon (guests.py loads them ahead; the load finds a deleted one gone).

Each cell is read on a connection of the watch's own, kept between polls in autocommit
(one statement, one round trip and one transaction per poll): a connection checked out of
the pool for every poll cost a pre-ping, a transaction of its own on PostgreSQL. A connection
found dead is replaced once within the poll (the pool's checkout pings the new one); a poll
that still fails is reported (``failed``) and the next one opens a new connection.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Executable,
    Select,
    func,
    literal,
    select,
    union_all,
)
from sqlalchemy.exc import DBAPIError

from cloudseed.db.data_version import DataVersion
from cloudseed.db.engines import Database
from cloudseed.nova_metadata import schema

log = logging.getLogger(__name__)

LOOKBACK = dt.timedelta(seconds=5)
SETTLE = dt.timedelta(seconds=2)
SLOW_EVERY = 10  # polls between two reads of the slow columns
# Stamps older than this when the watch starts are history: their rows were committed before
# anything was cached (LOOKBACK for a commit that comes late, as much again for a writer whose
# clock runs behind this host's), so every load already reads them. Reporting them would drop
# and load again, at the first poll, every guest just loaded ahead.
HISTORY = 2 * LOOKBACK
DELETED = "instances.deleted_at"  # the one signal whose instances are not loaded ahead


@dataclass(frozen=True)
class Watched:
    """One timestamp column and the instance its rows belong to; ``deleted``: the table's
    ``deleted`` column when only deleted rows are wanted (``deleted > 0`` lets an index on it
    skip the live rows)."""

    name: str
    stamp: ColumnElement[dt.datetime]
    instance: ColumnElement[str]
    slow: bool = False
    deleted: ColumnElement[int] | None = None


_t = schema
WATCHED = (
    Watched("instances.updated_at", _t.instances.c.updated_at, _t.instances.c.uuid),
    Watched(
        DELETED,
        _t.instances.c.deleted_at,
        _t.instances.c.uuid,
        deleted=_t.instances.c.deleted,
    ),
    Watched(
        "instance_metadata.deleted_at",
        _t.instance_metadata.c.deleted_at,
        _t.instance_metadata.c.instance_uuid,
        deleted=_t.instance_metadata.c.deleted,
    ),
    Watched(
        "instance_extra.updated_at",
        _t.instance_extra.c.updated_at,
        _t.instance_extra.c.instance_uuid,
        slow=True,
    ),
    Watched(
        "instance_info_caches.updated_at",
        _t.instance_info_caches.c.updated_at,
        _t.instance_info_caches.c.instance_uuid,
        slow=True,
    ),
    *(
        Watched(
            f"block_device_mapping.{column}",
            _t.block_device_mapping.c[column],
            _t.block_device_mapping.c.instance_uuid,
            slow=True,
        )
        for column in ("created_at", "updated_at", "deleted_at")
    ),
)


@dataclass
class _Cursor:
    since: dt.datetime | None = None  # the highest stamp seen
    seen: set[tuple[str, dt.datetime]] = field(default_factory=set)
    history: dt.datetime | None = None  # stamps before it are never reported (HISTORY)

    def take(self, uuid: str, stamp: dt.datetime, settled: dt.datetime) -> bool:
        """Whether (uuid, stamp) is to be reported: new, or a whole second stamped after
        ``settled`` (the column may hold whole seconds: another change may share it), and
        not history."""
        if self.history is not None and stamp < self.history:
            return False
        if (uuid, stamp) in self.seen and (stamp < settled or stamp.microsecond):
            return False
        self.seen.add((uuid, stamp))
        if self.since is None or stamp > self.since:
            self.since = stamp
        return True

    def forget_old(self) -> None:
        if self.since is not None:
            floor = self.since - LOOKBACK
            self.seen = {item for item in self.seen if item[1] >= floor}


@dataclass
class _Cell:
    db: Database
    cursors: dict[str, _Cursor]
    probe: DataVersion | None
    polls: int = 0
    connection: Connection | None = None  # the watch's own, kept between polls

    def read(self, statement: Executable) -> Sequence[Any]:
        """``statement``'s rows, on this cell's connection (opened when there is none; once
        more when the one kept was found dead)."""
        for attempt in (1, 2):
            connection = self.connection
            if connection is None:
                connection = self.db.engine.connect().execution_options(
                    isolation_level="AUTOCOMMIT"
                )
                self.connection = connection
            try:
                return connection.execute(statement).all()
            except DBAPIError as exc:
                self.close()
                if attempt == 2 or not exc.connection_invalidated:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            with suppress(Exception):  # a dead connection may fail to say goodbye
                connection.close()


class Change(NamedTuple):
    uuid: str
    signal: str  # the Watched's name that reported it


class NovaChanges:
    """Polls every database that ``databases()`` lists; calls ``changed(uuid)`` on the loop
    for each instance changed, then ``ahead(uuids)`` with those of the poll that may be
    loaded ahead, ``failed()`` when a poll fails (changes may be missed)."""

    def __init__(
        self,
        databases: Callable[[], list[Database]],
        *,
        interval: float,
        recent: float = 0.0,
        recent_limit: int = 0,
    ) -> None:
        """``recent``, ``recent_limit``: at start, hand ``ahead`` the live instances updated
        in the last ``recent`` seconds, newest first, at most ``recent_limit`` of them."""
        self._databases = databases
        self.interval = interval
        self.recent = recent
        self.recent_limit = recent_limit
        self._cells: dict[str, _Cell] = {}  # by URL
        self._history: dt.datetime | None = None  # HISTORY before start, at start
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.statements = 0  # statements run by polls so far (the idle cost, measured)

    async def start(
        self,
        *,
        changed: Callable[[str], None],
        failed: Callable[[], None],
        ahead: Callable[[list[str]], None] | None = None,
    ) -> None:
        self._history = schema.utcnow() - HISTORY
        await asyncio.to_thread(self.add_cells)
        if ahead is not None and self.recent > 0 and self.recent_limit > 0:
            # Before the polls begin: they share the cells' connections.
            try:
                recent = await asyncio.to_thread(
                    self.recently_updated, self.recent, self.recent_limit
                )
            except Exception:  # only a head start: guests load at their requests instead
                log.exception("reading the instances updated lately failed")
                recent = []
            if recent:
                log.info("loading %d instances updated in the last %g s", len(recent), self.recent)
                ahead(recent)
        self._task = asyncio.create_task(self._follow(changed, failed, ahead))

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task

    async def close(self) -> None:
        for cell in self._cells.values():
            cell.close()
            if cell.probe is not None:
                cell.probe.close()

    def add_cells(self) -> None:
        for db in self._databases():
            if db.url in self._cells:
                continue
            # The probe's first look comes before the cursors' read: a commit between the
            # two is read twice, never missed.
            probe = DataVersion.of(db.engine)
            cell = _Cell(db=db, cursors={}, probe=probe)
            try:
                highest = cell.read(
                    union_all(
                        *(
                            select(literal(w.name).label("watched"), func.max(w.stamp))
                            for w in WATCHED
                        )
                    )
                )
            except BaseException:
                cell.close()
                if probe is not None:
                    probe.close()
                raise
            self.statements += 1
            cell.cursors = {
                name: _Cursor(since=stamp, history=self._history) for name, stamp in highest
            }
            self._cells[db.url] = cell

    async def _follow(
        self,
        changed: Callable[[str], None],
        failed: Callable[[], None],
        ahead: Callable[[list[str]], None] | None,
    ) -> None:
        polls = 0
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval)
                break
            except TimeoutError:
                pass
            polls += 1
            try:
                if polls % 20 == 0:  # cells added since start (about every 10 s)
                    await asyncio.to_thread(self.add_cells)
                due = [c for c in self._cells.values() if c.probe is None or c.probe.changed()]
                if due:
                    found = await asyncio.to_thread(self.poll_once, due)
                    for change in found:
                        changed(change.uuid)
                    live = list(dict.fromkeys(c.uuid for c in found if c.signal != DELETED))
                    if ahead is not None and live:
                        ahead(live)
            except Exception:
                # A database that is away for a while must not end the watch: what is cached
                # may be stale by now, so it is dropped, and polling goes on.
                log.exception("reading Nova's changes failed; dropping cached documents")
                failed()
                await asyncio.sleep(1)

    def poll_once(self, cells: list[_Cell] | None = None) -> list[Change]:
        """One poll of ``cells`` (all by default): the instances changed since the last."""
        changed: list[Change] = []
        for cell in cells if cells is not None else list(self._cells.values()):
            cell.polls += 1
            slow = cell.polls % SLOW_EVERY == 1
            queries = [self._query(w, cell.cursors[w.name]) for w in WATCHED if slow or not w.slow]
            rows = cell.read(union_all(*queries))
            self.statements += 1
            settled = schema.utcnow() - SETTLE
            for row in rows:
                name, uuid, stamp = str(row[0]), row[1], row[2]
                if uuid is None or stamp is None:
                    continue
                if cell.cursors[name].take(str(uuid), stamp, settled):
                    changed.append(Change(str(uuid), name))
            for cursor in cell.cursors.values():
                cursor.forget_old()
        return changed

    def recently_updated(self, seconds: float, limit: int) -> list[str]:
        """The live instances of every cell updated in the last ``seconds`` (the indexed
        ``updated_at``), newest first, at most ``limit``."""
        table = schema.instances
        since = schema.utcnow() - dt.timedelta(seconds=seconds)
        query = (
            select(table.c.uuid, table.c.updated_at)
            .where(table.c.updated_at >= since, table.c.deleted == 0)
            .order_by(table.c.updated_at.desc())
            .limit(limit)
        )
        found: list[tuple[dt.datetime, str]] = []
        for cell in list(self._cells.values()):
            found.extend((stamp, str(uuid)) for uuid, stamp in cell.read(query))
            self.statements += 1
        found.sort(reverse=True)
        return [uuid for _stamp, uuid in found[:limit]]

    @staticmethod
    def _query(watched: Watched, cursor: _Cursor) -> Select[str, str, dt.datetime]:
        query = select(literal(watched.name).label("watched"), watched.instance, watched.stamp)
        if watched.deleted is not None:
            query = query.where(watched.deleted > 0)
        if cursor.since is None:
            return query.where(watched.stamp.is_not(None))
        return query.where(watched.stamp >= cursor.since - LOOKBACK)
