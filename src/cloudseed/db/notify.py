"""PostgreSQL LISTEN/NOTIFY: wake-ups between processes, with polling as the fallback.

``notify`` queues a notification in the caller's transaction: PostgreSQL delivers it when
(and only if) the transaction commits, so a listener never hears of work that is not there.
``Listener`` holds one dedicated connection per process that LISTENs on a channel and calls a
function for each payload; it reconnects after a database outage, and tells whoever needs to
know when its connection comes and goes (what was sent meanwhile was not heard, so they look
for themselves). Other backends have no push: ``notify`` does nothing there, agents find work
and metadata workers find changed guests by polling.

Channels: ``OPERATIONS`` (the payload is the host that got work, servers/lifecycle/queue.py) and
``GUEST_CHANGES`` (empty payload, once per transaction that changed what a guest sees,
servers/records.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

OPERATIONS = "cloudseed_operations"
GUEST_CHANGES = "cloudseed_guest_changes"
RECONNECT_DELAY = 2.0  # seconds between attempts while the database is away
# How long a wait for notifications lasts: how soon ``stop`` is noticed (no database traffic).
WAIT = 0.25


def pushes(session: Session) -> bool:
    return session.bind is not None and session.bind.dialect.name == "postgresql"


def notify(session: Session, channel: str, payload: str) -> None:
    """Queue a notification in ``session``'s transaction (PostgreSQL only)."""
    if pushes(session):
        session.execute(
            text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload}
        )


class Listener:
    """LISTEN on ``channel`` of the PostgreSQL database at ``url`` in a thread of its own and
    call ``on_payload`` for each notification, until ``stop``."""

    def __init__(
        self,
        url: str,
        channel: str,
        on_payload: Callable[[str], None],
        *,
        on_connection: Callable[[bool], None] | None = None,
    ) -> None:
        """``on_connection(True)`` is called once LISTEN is in place, ``on_connection(False)``
        when the connection is lost; both in the listener's thread."""
        parsed = make_url(url)
        # psycopg takes a libpq URL: the SQLAlchemy driver suffix goes.
        self.dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        self.channel = channel
        self.on_payload = on_payload
        self.on_connection = on_connection or (lambda _up: None)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cloudseed-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        import psycopg

        while not self._stopping.is_set():
            connected = False
            try:
                # Named, so an operator (or a test) finds it in pg_stat_activity.
                with psycopg.connect(
                    self.dsn, autocommit=True, application_name=f"cloudseed {self.channel}"
                ) as conn:
                    conn.execute(f'LISTEN "{self.channel}"')
                    connected = True
                    self.on_connection(True)
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=WAIT):
                            self.on_payload(note.payload)
            except Exception:
                if connected:
                    self.on_connection(False)
                if self._stopping.is_set():
                    return
                log.warning("LISTEN %s: connection lost; polling until it is back", self.channel)
                self._stopping.wait(RECONNECT_DELAY)
