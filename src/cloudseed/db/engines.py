"""Engines and sessions for the API database and each cell database.

SQLite is the embedded default, so it gets the settings that make it a good server database:
WAL (readers never block the writer), a busy timeout instead of instant "database is locked",
foreign keys on, and ``BEGIN IMMEDIATE`` for every transaction so two writers queue at the start
instead of failing when the second one tries to upgrade its read lock.
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from cloudseed.db import checkpoints
from cloudseed.db.announcements import PENDING, Announcer
from cloudseed.errors import ConfigError, DatabaseUnavailable, WriteContended

T = TypeVar("T")
# A transaction is run this many times in all when the database rolls it back (a deadlock, a
# serialization failure) before the caller hears WriteContended.
DEFAULT_ATTEMPTS = 5
# Seconds: before attempt n + 1, a pause of up to n times this (random, so that the
# transactions that collided do not meet again).
RETRY_PAUSE = 0.005


class Isolation(enum.Enum):
    """A transaction's isolation on PostgreSQL and MariaDB (``Database.run``). SQLite's
    writers queue anyway (BEGIN IMMEDIATE), so it ignores this."""

    # The server's own: READ COMMITTED on PostgreSQL, REPEATABLE READ on MariaDB.
    DEFAULT = None
    # No concurrent transaction interleaves with this one, so a count checked before an
    # insert (a quota) holds at commit; the database rolls back one of two conflicting
    # transactions, which is run again.
    SERIALIZABLE = "SERIALIZABLE"
    # A locking read locks only the rows it returns. At REPEATABLE READ, MariaDB's locking
    # read also holds every row its plan scanned (the whole table when it walks the primary
    # key, as it does for a small table), and a ``SKIP LOCKED`` read of another transaction
    # then skips rows that are no one's: a work queue's claim needs this.
    READ_COMMITTED = "READ COMMITTED"


SQLITE_BUSY_TIMEOUT_MS = 30_000
# anyio's default worker-thread limit: at most this many threads hold a connection at once.
SQLITE_POOL_SIZE = 40


def redacted(url: str) -> str:
    """``url`` as it may be shown: the password replaced by ``***``.

    Database URLs carry passwords, and they reach error messages and logs; only this form
    does. A string that does not even parse as a URL is not shown at all.
    """
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(unparsable URL, not shown)"


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """An engine for ``url`` with the settings cloudseed relies on for that backend."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: e.g. a port that is not a number
        # SQLAlchemy's message quotes the whole string, password and all.
        raise ConfigError(
            "invalid database URL: expected dialect[+driver]://user:password@host/database"
        ) from None
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {}
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        # One pooled connection per worker thread that may want one: with QueuePool's default
        # (5, overflow 10) every request past the fifth concurrent one opened a connection and
        # ran the PRAGMAs below, then closed it. Connections are opened only when first needed.
        # Last in, first out: the connection just returned (its page cache warm) is the next
        # one taken, and a connection opened at a peak stays idle afterwards instead of taking
        # its turn and filling a page cache of its own (2 MiB each).
        kwargs.update(pool_size=SQLITE_POOL_SIZE, max_overflow=SQLITE_POOL_SIZE, pool_use_lifo=True)
    elif backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        kwargs.update(pool_size=pool_size, pool_pre_ping=True)
    elif backend in ("mysql", "mariadb"):
        if "+" not in parsed.drivername:
            parsed = parsed.set(drivername=f"{backend}+pymysql")
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
        kwargs.update(pool_size=pool_size, pool_pre_ping=True, pool_recycle=3600)
    else:
        raise ConfigError(
            f"unsupported database {backend!r} in {redacted(url)}: "
            "use sqlite, postgresql or mysql/mariadb"
        )
    try:
        engine = create_engine(parsed, **kwargs)
    except (ArgumentError, ImportError) as exc:
        detail = str(exc).replace(url, redacted(url))
        if parsed.password:
            detail = detail.replace(str(parsed.password), "***")
        raise ConfigError(f"cannot use database URL {redacted(url)}: {detail}") from None
    if backend == "sqlite":
        _configure_sqlite(engine)
        if parsed.database and parsed.database != ":memory:":
            checkpoints.register(engine, Path(parsed.database))
    return engine


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints run in a thread of their own (db/checkpoints.py); a commit only past this.
        cursor.execute(f"PRAGMA wal_autocheckpoint={checkpoints.BACKSTOP_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Readers take no lock in WAL; writers queue up front (see the module docstring).
        # Straight to the sqlite3 connection: exec_driver_sql's statement machinery (events,
        # cursor wrapping, result) cost more than the BEGIN itself, twice per server show.
        statement = (
            "BEGIN" if conn.get_execution_options().get(READ_ONLY_OPTION) else "BEGIN IMMEDIATE"
        )
        conn.connection.driver_connection.execute(statement)


READ_ONLY_OPTION = "cloudseed_read_only"


@dataclass(frozen=True)
class Database:
    """One database: its engine, and session factories for writing and for reading."""

    name: str
    url: str = field(repr=False)  # has the password in it
    engine: Engine
    writer: sessionmaker[Session]
    reader: sessionmaker[Session]

    # SQLite allows one writer; threads of this process queue here in order instead of
    # polling the file lock with growing back-off (seconds of tail latency under load).
    write_lock: threading.Lock | None = None
    # Who hears what this database's transactions announce after they commit: its own
    # listeners unless the opener shares one (db/announcements.py).
    announcer: Announcer = field(default_factory=Announcer)

    @classmethod
    def connect(cls, name: str, url: str, *, announcer: Announcer | None = None) -> Database:
        engine = make_engine(url)
        return cls(
            name=name,
            url=url,
            engine=engine,
            writer=sessionmaker(engine, expire_on_commit=False),
            reader=sessionmaker(
                engine.execution_options(**{READ_ONLY_OPTION: True}), expire_on_commit=False
            ),
            write_lock=threading.Lock() if engine.dialect.name == "sqlite" else None,
            announcer=announcer if announcer is not None else Announcer(),
        )

    def dispose(self) -> None:
        checkpoints.forget(self.engine)
        self.engine.dispose()

    @overload
    def run(
        self,
        work: Callable[[Session], T],
        *,
        write: bool = False,
        attempts: int = DEFAULT_ATTEMPTS,
        isolation: Isolation = Isolation.DEFAULT,
        lost_to: tuple[type[Exception], ...] = (),
        core: Literal[False] = False,
    ) -> T: ...

    @overload
    def run(
        self,
        work: Callable[[Connection], T],
        *,
        write: bool = False,
        attempts: int = DEFAULT_ATTEMPTS,
        isolation: Isolation = Isolation.DEFAULT,
        lost_to: tuple[type[Exception], ...] = (),
        core: Literal[True],
    ) -> T: ...

    def run(
        self,
        work: Callable[[Any], T],
        *,
        write: bool = False,
        attempts: int = DEFAULT_ATTEMPTS,
        isolation: Isolation = Isolation.DEFAULT,
        lost_to: tuple[type[Exception], ...] = (),
        core: bool = False,
    ) -> T:
        """``work(session)`` in one transaction, committed when it returns and rolled back when
        it raises; its result is returned. The one way to write (``write=True``); reads may use
        it too, or the ``read()`` block.

        When the database rolls the transaction back to break a deadlock or a serialization
        conflict (``is_deadlock``), nothing of it stayed and ``work`` runs again, up to
        ``attempts`` times in all, then ``WriteContended`` (409). So ``work`` may run more
        than once: it does nothing but its statements (no files, network, counters or shared
        state; a site that cannot promise that passes ``attempts=1`` and says why).
        ``lost_to``: the caller's own errors that mean the same (a concurrent transaction
        took a unique key first); after the last attempt they are raised as they are.

        ``isolation``: the transaction's on PostgreSQL and MariaDB (``Isolation``). ``core``:
        ``work`` gets a Core Connection instead of a Session, for hot paths of Core statements
        only (key pair import and delete), where a Session cost as much as the statement.

        What ``work`` announces (``db.announcements.announce``) is told to this database's
        ``announcer`` after the commit, before ``run`` returns, once."""
        for attempt in range(1, attempts + 1):
            try:
                result, committed = self._once(work, write=write, isolation=isolation, core=core)
            except lost_to:
                if attempt == attempts:
                    raise
            except OperationalError as exc:
                if not is_deadlock(exc):
                    raise
                if attempt == attempts:
                    raise WriteContended() from exc
                # The transactions that collided would collide again if all ran again at
                # once: a short random pause, longer each time, lets one of them through.
                time.sleep(random.uniform(0, RETRY_PAUSE * attempt))
            else:
                self.announcer.deliver(committed)
                return result
        raise ValueError("attempts must be at least 1")

    def _once(
        self, work: Callable[[Any], T], *, write: bool, isolation: Isolation, core: bool
    ) -> tuple[T, dict[str, set[str]]]:
        """One attempt of ``run``: the result and what the committed transaction announced."""
        pending: dict[str, set[str]] = {}
        level = None if self._sqlite else isolation.value
        lock = self.write_lock if write and self.write_lock is not None else nullcontext()
        with lock, _translate_outages():
            if core:
                engine = self.engine if write else self._read_engine
                with engine.connect() as connection:
                    if level is not None:
                        # For this transaction only: the pool resets it.
                        connection.execution_options(isolation_level=level)
                    connection.info[PENDING] = pending
                    try:
                        with connection.begin():
                            result = work(connection)
                    finally:
                        connection.info.pop(PENDING, None)
            else:
                with (self.writer if write else self.reader).begin() as session:
                    if level is not None:
                        session.connection(execution_options={"isolation_level": level})
                    session.info[PENDING] = pending
                    result = work(session)
        return result, pending

    @cached_property
    def _read_engine(self) -> Engine:
        """The engine with the read-only option, made once (``execution_options`` builds a
        new engine object on every call, a cost each Core read paid)."""
        return self.engine.execution_options(**{READ_ONLY_OPTION: True})

    @property
    def local_reads(self) -> bool:
        """Whether a read transaction is a library call on a local file that waits for no
        other transaction: SQLite in WAL mode, whose readers never wait for its writer.
        Such a read costs less than the hop to a worker thread that would run it, so routes
        run it on the event loop (``web/transactions.py``); a PostgreSQL or MariaDB read
        waits on the network and goes to a thread."""
        return self._sqlite

    @property
    def _sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only transaction as a block: ``run(work)``'s twin for code that reads in
        place. Nothing is written, so nothing is rolled back to run again or announced."""
        with _translate_outages(), self.reader.begin() as session:
            yield session


@contextmanager
def _translate_outages() -> Iterator[None]:
    """Outages become DatabaseUnavailable, so the edge answers 503 rather than 500."""
    try:
        yield
    except OperationalError as exc:
        if exc.connection_invalidated or _is_connect_error(exc):
            raise DatabaseUnavailable() from exc
        raise


def is_deadlock(exc: BaseException) -> bool:
    """Whether the database gave up the transaction to break a lock cycle or a conflict
    between concurrent ones (MySQL/MariaDB 1213, or a lock wait timeout, 1205; PostgreSQL
    40P01, or a serialization failure, 40001): it was rolled back as a whole and may simply
    run again."""
    if not isinstance(exc, OperationalError):
        return False
    orig = exc.orig
    code = orig.args[0] if orig is not None and orig.args else None
    return code in (1205, 1213) or getattr(orig, "sqlstate", None) in ("40P01", "40001")


# SQLSTATEs of a server that is not taking work: class 08 (connection exceptions), and
# PostgreSQL's admin_shutdown, crash_shutdown and cannot_connect_now (57P01-57P03).
_OUTAGE_SQLSTATES = ("57P01", "57P02", "57P03")


def _is_connect_error(exc: DBAPIError) -> bool:
    sqlstate = getattr(exc.orig, "sqlstate", None) or ""
    if sqlstate.startswith("08") or sqlstate in _OUTAGE_SQLSTATES:
        return True
    text = str(exc.orig).lower()
    return any(
        s in text
        for s in (
            "connection refused",
            "could not connect",
            "can't connect",
            "server has gone away",
            "lost connection",
            "unable to open database",
            # A PostgreSQL server stopping or starting refuses new connections with FATAL
            # 57P03 ("the database system is shutting down", "... is starting up", "... is
            # not yet accepting connections"); libpq reports it while connecting, so the
            # error carries no SQLSTATE.
            "the database system is",
            "server closed the connection unexpectedly",
            "terminating connection due to administrator command",
            # MariaDB/MySQL 1053 while it stops.
            "server shutdown in progress",
        )
    )
