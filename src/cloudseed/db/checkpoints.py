"""SQLite's WAL checkpoints in a thread of their own, off the path of the requests.

In WAL mode a commit appends to the write-ahead log and, with ``synchronous=NORMAL``, does not
wait for the disk. Copying the log back into the database file (a checkpoint) does: it syncs
the log, writes the pages and syncs the database file. By default SQLite runs it inside the
commit that takes the log past 1,000 pages, so every few dozen server creates one of them
waited for two syncs: 35-230 ms where the others took 15-20 (the creates' p99,
docs/benchmarks.md, issue 36, session 16).

Long-running processes that write (``cloudseed serve``'s workers of the compute API,
``cloudseed compute``) call ``start()``; a worker of the metadata service alone, which mostly
reads, leaves the copying of the builds' pages to them instead of doing it while it answers
a storm. A daemon thread then checkpoints every SQLite database this process opened, each
``INTERVAL`` seconds, in PASSIVE mode (it never waits for a reader or a writer and never
blocks one; what a reader still needs is copied at a later pass), through the sqlite3 module,
which lets go of the GIL while SQLite works. The commits' own checkpoint is moved out to
``BACKSTOP_PAGES``: it still bounds the log of a process that runs no thread (a CLI command,
whose last connection to close checkpoints anyway) and of a burst that outpaces the thread.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import weakref
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from cloudseed.periodic import Periodic

log = logging.getLogger(__name__)

INTERVAL = 1.0  # seconds between passes
# The log size (pages of 4 KiB) at which a commit checkpoints by itself: 16 MiB, some 16 s of
# a storm's seeding writes.
BACKSTOP_PAGES = 4000

_lock = threading.Lock()
# Every SQLite database file this process opened and has not disposed of. Weak: an engine
# nobody disposed of is still collected, with its pooled connections, as before the thread.
_databases: weakref.WeakKeyDictionary[Engine, Path] = weakref.WeakKeyDictionary()
_thread: Periodic | None = None


def register(engine: Engine, path: Path) -> None:
    """``engine``'s database file is checkpointed by the thread (once started)."""
    with _lock:
        _databases[engine] = path


def forget(engine: Engine) -> None:
    """``engine`` is disposed of: no more checkpoints through it."""
    with _lock:
        _databases.pop(engine, None)


def start() -> None:
    """Checkpoint every registered database each ``INTERVAL`` seconds from now on, in a
    daemon thread (once per process)."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = Periodic(
                checkpoint_all,
                interval=INTERVAL,
                name="sqlite-checkpoints",
                failure="checkpointing SQLite databases failed",
                first_pass_at_once=False,
            )
    _thread.start()


def checkpoint_all() -> None:
    """One pass: a PASSIVE checkpoint of each registered database whose file still exists (a
    vanished one is left alone: connecting would make a new, empty file)."""
    with _lock:
        databases = list(_databases.items())
    for engine, path in databases:
        if not path.exists():
            continue
        try:
            checkpoint(engine)
        except (DBAPIError, sqlite3.Error) as exc:  # busy or gone: the next pass tries again
            log.debug("checkpoint of %s skipped: %s", path, exc)


def checkpoint(engine: Engine) -> tuple[int, int, int]:
    """A PASSIVE checkpoint on one of ``engine``'s pooled connections, outside any transaction
    (a checkpoint cannot run inside one): SQLite's (busy, log pages, pages checkpointed)."""
    raw = engine.raw_connection()
    try:
        connection = raw.driver_connection
        assert connection is not None  # a pooled connection, just checked out
        cursor = connection.cursor()
        try:
            # All rows, then closed: a statement left unfinished would hold a read snapshot
            # on the pooled connection, and the log could never start over.
            ((busy, logged, copied),) = cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            cursor.close()
    finally:
        raw.close()
    return int(busy), int(logged), int(copied)
