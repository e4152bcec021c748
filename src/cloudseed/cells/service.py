"""Finding the cell database that holds an instance, and connecting to it once.

The API database maps every instance to its cell (``instance_mappings``); cell databases are
opened lazily from ``cell_mappings`` and kept for the life of the process. The default cell,
``cell1``, is the one ``[database] connection`` names; ``map_default_cell`` keeps its mapping
in step with that setting (``cloudseed db sync`` calls it).
"""

from __future__ import annotations

import threading
import uuid as uuid_module
from collections.abc import Iterable

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.cells.models import CellMapping, InstanceMapping
from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.errors import ConfigError

DEFAULT_CELL = "cell1"
# Every request about a server asks this first; built once rather than per request.
_CELL_OF_ANY = select(InstanceMapping.cell_id).where(
    InstanceMapping.instance_uuid == bindparam("uuid")
)
_CELL_OF_LIVE = _CELL_OF_ANY.where(~InstanceMapping.queued_for_delete)
_CELL_IDS = select(CellMapping.id).order_by(CellMapping.id)
_CELLS_OF_LIVE = select(InstanceMapping.cell_id, InstanceMapping.instance_uuid).where(
    InstanceMapping.instance_uuid.in_(bindparam("uuids", expanding=True)),
    ~InstanceMapping.queued_for_delete,
)


def map_default_cell(session: Session, url: str) -> None:
    """Keep the ``cell1`` mapping pointing at ``[database] connection``."""
    cell = session.scalar(select(CellMapping).where(CellMapping.name == DEFAULT_CELL))
    if cell is None:
        session.add(
            CellMapping(uuid=str(uuid_module.uuid4()), name=DEFAULT_CELL, database_connection=url)
        )
    elif cell.database_connection != url:
        cell.database_connection = url


def cell_urls(session: Session) -> list[tuple[str, str]]:
    """(name, database URL) of every mapped cell, in mapping order."""
    rows = session.execute(
        select(CellMapping.name, CellMapping.database_connection).order_by(CellMapping.id)
    )
    return [(name, url) for name, url in rows]


def default_cell(session: Session) -> int:
    """Where new instances go: the first enabled cell (API database)."""
    cell_id = session.scalar(
        select(CellMapping.id).where(~CellMapping.disabled).order_by(CellMapping.id).limit(1)
    )
    if cell_id is None:
        raise ConfigError("no enabled cell is mapped; run 'cloudseed db sync'")
    return cell_id


class CellDatabases:
    def __init__(self, api_db: Database) -> None:
        self.api_db = api_db
        self._open: dict[int, Database] = {}
        self._lock = threading.Lock()

    def by_id(self, cell_id: int) -> Database:
        with self._lock:
            db = self._open.get(cell_id)
        if db is not None:
            return db
        with self.api_db.read() as session:
            cell = session.get(CellMapping, cell_id)
            if cell is None:
                raise ConfigError(f"cell {cell_id} is not mapped; run 'cloudseed db sync'")
            name, url = cell.name, cell.database_connection
        # Announcing through the API database's announcer: whoever listens there hears all cells.
        db = Database.connect(name, url, announcer=self.api_db.announcer)
        with self._lock:
            existing = self._open.setdefault(cell_id, db)
        if existing is not db:
            db.dispose()
        return existing

    def all_cells(self) -> list[Database]:
        return list(self.all_cells_by_id().values())

    def all_cells_by_id(self) -> dict[int, Database]:
        # A Core read: the metadata service's loads and the agents' passes ask every time,
        # and a Session's set-up cost several times the query.
        ids = self.api_db.run(
            lambda connection: list(connection.execute(_CELL_IDS).scalars()), core=True
        )
        return {i: self.by_id(i) for i in ids}

    def cells_of(self, uuids: Iterable[str]) -> dict[int, set[str]]:
        """The cell id of each instance that is mapped and not queued for delete, in one
        query: {cell id: uuids}."""
        uuids = list(uuids)
        found: dict[int, set[str]] = {}
        if not uuids:
            return found
        rows = self.api_db.run(
            lambda connection: connection.execute(_CELLS_OF_LIVE, {"uuids": padded(uuids)}).all(),
            core=True,
        )
        for cell_id, uuid in rows:
            if cell_id is not None:
                found.setdefault(cell_id, set()).add(uuid)
        return found

    def for_instance(self, uuid: str, *, deleted_too: bool = False) -> Database:
        """The cell of a live instance (``deleted_too``: of a deleted one as well)."""
        query = _CELL_OF_ANY if deleted_too else _CELL_OF_LIVE
        # On a Core connection: every server request asks, and a Session's set-up cost as
        # much as the query.
        cell_id = self.api_db.run(
            lambda connection: connection.execute(query, {"uuid": uuid}).scalar(), core=True
        )
        if cell_id is None:
            raise InstanceNotFound(uuid)
        return self.by_id(cell_id)

    def dispose(self) -> None:
        with self._lock:
            for db in self._open.values():
                db.dispose()
            self._open.clear()
