"""Whether another connection has committed to a SQLite database since the last look, for the
price of one ``PRAGMA data_version`` on a connection kept for it (no transaction, no thread,
no query plan): SQLite has no NOTIFY, so the metadata change feed polls, and most polls of an
idle cloud find nothing. The pragma's value moves whenever any other connection commits; this
connection never writes, so every commit counts."""

from __future__ import annotations

import sqlite3

from sqlalchemy.engine import Engine


class DataVersion:
    def __init__(self, path: str) -> None:
        # Asked from the event loop and created in a worker thread; used by one task at a
        # time. timeout=0: a busy database answers "changed" at once instead of blocking.
        self._connection = sqlite3.connect(path, timeout=0, check_same_thread=False)
        self._seen: int | None = None
        self.changed()

    @classmethod
    def of(cls, engine: Engine) -> DataVersion | None:
        """A probe for ``engine``'s database file; None for other databases and in-memory
        SQLite (another connection would open another database)."""
        path = engine.url.database
        if engine.dialect.name != "sqlite" or not path or path == ":memory:":
            return None
        return cls(path)

    def changed(self) -> bool:
        """True when a commit may have happened since the last call (also when the answer
        cannot be read: a read of the feed then finds out)."""
        try:
            row = self._connection.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            return True
        version = int(row[0])
        changed = version != self._seen
        self._seen = version
        return changed

    def close(self) -> None:
        self._connection.close()


__all__ = ["DataVersion"]
