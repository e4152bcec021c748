"""Nova's databases as the drop-in opens them: the API database, every cell's database named
in ``cell_mappings`` (its ``database_connection`` template filled from ``[database]
connection``, as Nova's CellMapping.format_db_url fills it), and ``[database] connection``
itself, which ``local_metadata_per_cell`` deployments read instead of the cells.

Drivers: Nova's URLs name the drivers of Nova's environment; this one has PyMySQL and psycopg
(version 3). ``mysql://`` and ``mysql+mysqldb://`` are opened with PyMySQL, ``postgresql://``
and ``postgresql+psycopg2://`` with psycopg; oslo.db's ``plugin=`` query parameter (devstack's
dbcounter) is not a driver's and is dropped. SQLite is opened as it is, without the WAL mode
and other settings cloudseed gives its own files: Nova's database is Nova's.

cell0 holds the instances that failed to schedule: they never booted, so no guest asks for
them, and the drop-in neither serves nor watches them (Nova would serve such an instance's
documents to a proxy that named it).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine, create_engine, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from cloudseed.db.engines import READ_ONLY_OPTION, Database, redacted
from cloudseed.errors import ConfigError
from cloudseed.nova_metadata import schema
from cloudseed.nova_metadata.config import CELL0_UUID

log = logging.getLogger(__name__)

# Query parameters of oslo.db's, not of any driver.
_NOT_DRIVER_PARAMETERS = ("plugin",)


def driver_url(url: str) -> URL:
    """``url`` (as nova.conf writes it) with the driver this environment has."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(
            "invalid database URL: expected dialect[+driver]://user:password@host/database"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend in ("mysql", "mariadb"):
        parsed = parsed.set(drivername=f"{backend}+pymysql")
        if "charset" not in parsed.query:
            parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    elif backend != "sqlite":
        raise ConfigError(
            f"unsupported database {backend!r} in {redacted(url)}: "
            "use sqlite, postgresql or mysql/mariadb"
        )
    return parsed.difference_update_query(_NOT_DRIVER_PARAMETERS)


def open_database(name: str, url: str) -> Database:
    """A Database (db/engines.py: transactions, outages as DatabaseUnavailable) on one of
    Nova's databases."""
    parsed = driver_url(url)
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs.update(pool_size=5, max_overflow=10, pool_pre_ping=True, pool_recycle=3600)
    try:
        engine: Engine = create_engine(parsed, **kwargs)
    except (ArgumentError, ImportError) as exc:
        raise ConfigError(
            f"cannot use database URL {redacted(url)}: {type(exc).__name__}"
        ) from None
    return Database(
        name=name,
        url=url,
        engine=engine,
        writer=sessionmaker(engine, expire_on_commit=False),
        reader=sessionmaker(
            engine.execution_options(**{READ_ONLY_OPTION: True}), expire_on_commit=False
        ),
    )


def format_cell_url(template: str, default: str | None) -> str:
    """A cell mapping's ``database_connection`` with Nova's template variables ({scheme},
    {username}, {password}, {hostname}, {port}, {path}, {query}, {fragment}) taken from
    ``[database] connection``, as Nova fills them (a missing part is ``None``); the template
    as it is when there is no default or it cannot be filled."""
    if default is None or "{" not in template:
        return template
    parts = urlsplit(default)
    try:
        return template.format(
            scheme=parts.scheme,
            username=parts.username,
            password=parts.password,
            hostname=parts.hostname,
            port=parts.port,
            path=parts.path.lstrip("/"),
            query=parts.query,
            fragment=parts.fragment,
        )
    except (KeyError, IndexError, ValueError):
        log.error("cannot fill the cell database template from [database] connection")
        return template


@dataclass(frozen=True)
class Cell:
    id: int
    uuid: str
    name: str
    db: Database


def check_reachable(db: Database, what: str) -> None:
    """ConfigError naming ``what`` (the option, the cell) and its URL, password masked,
    when ``db`` does not answer."""
    try:
        with db.engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        password = make_url(db.url).password if "://" in db.url else None
        if password:
            reason = reason.replace(str(password), "***")
        raise ConfigError(f"cannot reach {what} at {redacted(db.url)}: {reason}") from None


@dataclass
class NovaDatabases:
    """The API database and the cells, one engine per distinct URL."""

    api: Database
    default_url: str | None  # [database] connection
    cells: dict[int, Cell] = field(default_factory=dict)  # cell_mappings.id -> Cell
    _by_url: dict[str, Database] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, api_url: str, default_url: str | None) -> NovaDatabases:
        databases = cls(api=open_database("api", api_url), default_url=default_url)
        databases._by_url[api_url] = databases.api
        return databases

    def local(self) -> Database:
        """``[database] connection`` (local_metadata_per_cell, or an instance without a
        mapping, where Nova reads it too)."""
        if self.default_url is None:
            raise ConfigError("[database] connection is not set")
        return self._database("cell", self.default_url)

    def _database(self, name: str, url: str) -> Database:
        with self._lock:
            db = self._by_url.get(url)
            if db is None:
                db = self._by_url[url] = open_database(name, url)
            return db

    def refresh_cells(self) -> dict[int, Cell]:
        """Read ``cell_mappings`` again: cells added since are opened (none is ever closed
        while serving); cell0 is left out."""
        table = schema.cell_mappings
        with self.api.read() as session:
            rows = session.execute(
                select(table.c.id, table.c.uuid, table.c.name, table.c.database_connection)
            ).all()
        cells = dict(self.cells)  # replaced whole: other threads iterate over the old one
        for cell_id, uuid, name, template in rows:
            if uuid == CELL0_UUID or cell_id in cells:
                continue
            url = format_cell_url(template or "", self.default_url)
            cells[cell_id] = Cell(cell_id, uuid, name or uuid, self._database(name or uuid, url))
        self.cells = cells
        return cells

    def check(self, *, local: bool) -> None:
        """At start: every database answers (ConfigError otherwise, naming it)."""
        check_reachable(self.api, "the API database ([api_database] connection)")
        if local:
            check_reachable(self.local(), "the cell database ([database] connection)")
            return
        try:
            cells = self.refresh_cells()
        except SQLAlchemyError as exc:
            raise ConfigError(
                f"cannot read cell_mappings in the API database at {redacted(self.api.url)}: "
                f"{type(exc).__name__}"
            ) from None
        if not cells:
            log.warning("no cell besides cell0 in cell_mappings: no instance can be served")
        for cell in cells.values():
            check_reachable(cell.db, f"cell {cell.name}'s database")

    def dispose(self) -> None:
        for db in self._by_url.values():
            db.dispose()
