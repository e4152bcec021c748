"""After-commit announcements: what a transaction changed, told to listeners of this process
once it has committed.

Work run by ``Database.run`` calls ``announce(session, topic, items)``; the runner collects the
items of its own transaction and, after the commit, calls the ``Announcer``'s listeners of each
topic once with all of them, in the committing thread, before ``run`` returns (so before the
request that made the change answers). A transaction that rolls back announces nothing; one
that is run again announces only what its committed attempt collected.

Topics are the NOTIFY channels of ``db/notify.py`` (other processes hear the same changes
through PostgreSQL): ``GUEST_CHANGES`` (instance uuids, servers/records.py) and ``OPERATIONS``
(hosts that got work, servers/lifecycle/queue.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import Connection
from sqlalchemy.orm import Session

Listener = Callable[[frozenset[str]], None]
# Where the runner keeps its transaction's announcements: the Session's or Connection's info.
PENDING = "cloudseed.announcements"


class Announcer:
    """Listeners by topic. Every ``Database`` announces through one, its own unless it is given
    one to share: whoever builds the parts of a process that must hear each other's commits
    gives them one (``serve.py``: the compute API, its agent and the metadata service of a
    worker share its API database, and so its announcer; a cell database announces through
    its API database's, ``cells/service.py``)."""

    def __init__(self) -> None:
        self._listeners: dict[str, tuple[Listener, ...]] = {}
        self._lock = threading.Lock()

    def subscribe(self, topic: str, listener: Listener) -> Callable[[], None]:
        """Call ``listener(items)`` after each commit that announced ``topic``; returns the
        function that stops it."""
        with self._lock:
            self._listeners[topic] = (*self._listeners.get(topic, ()), listener)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners[topic] = tuple(
                    known for known in self._listeners.get(topic, ()) if known is not listener
                )

        return unsubscribe

    def deliver(self, committed: Mapping[str, set[str]]) -> None:
        """Tell each topic's listeners what a committed transaction announced."""
        for topic, items in committed.items():
            if items:
                for listener in self._listeners.get(topic, ()):
                    listener(frozenset(items))


def announce(transaction: Session | Connection, topic: str, items: Iterable[str]) -> bool:
    """Have ``items`` announced under ``topic`` when ``transaction`` (a Session or Connection
    ``Database.run`` gave its work) commits. True the first time ``topic`` is announced in this
    transaction (a caller queues its one NOTIFY then)."""
    pending: dict[str, set[str]] | None = transaction.info.get(PENDING)
    if pending is None:
        raise RuntimeError("announce() outside a transaction of Database.run")
    first = topic not in pending
    pending.setdefault(topic, set()).update(items)
    return first
