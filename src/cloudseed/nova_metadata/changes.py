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
clock runs more than SETTLE ahead of this host's would shorten that).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Select, func, literal, select, union_all

from cloudseed.db.data_version import DataVersion
from cloudseed.db.engines import Database
from cloudseed.nova_metadata import schema

log = logging.getLogger(__name__)

LOOKBACK = dt.timedelta(seconds=5)
SETTLE = dt.timedelta(seconds=2)
SLOW_EVERY = 10  # polls between two reads of the slow columns


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
        "instances.deleted_at",
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

    def take(self, uuid: str, stamp: dt.datetime, settled: dt.datetime) -> bool:
        """Whether (uuid, stamp) is to be reported: new, or stamped after ``settled``."""
        if (uuid, stamp) in self.seen and stamp < settled:
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


class NovaChanges:
    """Polls every database that ``databases()`` lists; calls ``changed(uuid)`` on the loop
    for each instance changed, ``failed()`` when a poll fails (changes may be missed)."""

    def __init__(self, databases: Callable[[], list[Database]], *, interval: float) -> None:
        self._databases = databases
        self.interval = interval
        self._cells: dict[str, _Cell] = {}  # by URL
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.statements = 0  # statements run by polls so far (the idle cost, measured)

    async def start(self, *, changed: Callable[[str], None], failed: Callable[[], None]) -> None:
        await asyncio.to_thread(self._add_cells)
        self._task = asyncio.create_task(self._follow(changed, failed))

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task

    async def close(self) -> None:
        for cell in self._cells.values():
            if cell.probe is not None:
                cell.probe.close()

    def _add_cells(self) -> None:
        for db in self._databases():
            if db.url in self._cells:
                continue
            # The probe's first look comes before the cursors' read: a commit between the
            # two is read twice, never missed.
            probe = DataVersion.of(db.engine)
            with db.read() as session:
                highest = session.execute(
                    union_all(
                        *(
                            select(literal(w.name).label("watched"), func.max(w.stamp))
                            for w in WATCHED
                        )
                    )
                ).all()
            self.statements += 1
            cursors = {name: _Cursor(since=stamp) for name, stamp in highest}
            self._cells[db.url] = _Cell(db=db, cursors=cursors, probe=probe)

    async def _follow(self, changed: Callable[[str], None], failed: Callable[[], None]) -> None:
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
                    await asyncio.to_thread(self._add_cells)
                due = [c for c in self._cells.values() if c.probe is None or c.probe.changed()]
                if due:
                    for uuid in await asyncio.to_thread(self.poll_once, due):
                        changed(uuid)
            except Exception:
                # A database that is away for a while must not end the watch: what is cached
                # may be stale by now, so it is dropped, and polling goes on.
                log.exception("reading Nova's changes failed; dropping cached documents")
                failed()
                await asyncio.sleep(1)

    def poll_once(self, cells: list[_Cell] | None = None) -> list[str]:
        """One poll of ``cells`` (all by default): the instances changed since the last."""
        changed: list[str] = []
        for cell in cells if cells is not None else list(self._cells.values()):
            cell.polls += 1
            slow = cell.polls % SLOW_EVERY == 1
            queries = [self._query(w, cell.cursors[w.name]) for w in WATCHED if slow or not w.slow]
            with cell.db.read() as session:
                rows = session.execute(union_all(*queries)).all()
            self.statements += 1
            settled = schema.utcnow() - SETTLE
            for row in rows:
                name, uuid, stamp = str(row[0]), row[1], row[2]
                if uuid is None or stamp is None:
                    continue
                if cell.cursors[name].take(str(uuid), stamp, settled):
                    changed.append(str(uuid))
            for cursor in cell.cursors.values():
                cursor.forget_old()
        return changed

    @staticmethod
    def _query(watched: Watched, cursor: _Cursor) -> Select[str, str, dt.datetime]:
        query = select(literal(watched.name).label("watched"), watched.instance, watched.stamp)
        if watched.deleted is not None:
            query = query.where(watched.deleted > 0)
        if cursor.since is None:
            return query.where(watched.stamp.is_not(None))
        return query.where(watched.stamp >= cursor.since - LOOKBACK)
