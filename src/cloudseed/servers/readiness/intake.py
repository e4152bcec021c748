"""The metadata service's side of a boot report: read the body (bounded), check it whole
(``events.py``), then take it in a worker thread (``store.py``). The caller has been
identified, and its session token checked, exactly as for every metadata request before this
is called (``metadata/app.py``): whatever the body says, the event is the caller's own.
"""

from __future__ import annotations

import asyncio

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.servers.readiness import store
from cloudseed.servers.readiness.events import MAX_BODY, parse_event
from cloudseed.types import Receive
from cloudseed.web.bodies import whole_body
from cloudseed.web.errors import RequestTooLarge


async def take_event(receive: Receive, *, caller: str, cells: CellDatabases) -> bytes:
    """Take the event ``caller`` posts; the answer's body: ``accepted``, ``repeat`` or
    ``stale`` and a newline. RequestTooLarge (413) past ``events.MAX_BODY``, with the rest of
    the body unread; InvalidBootEvent (400) for a body that is no event."""
    body = await whole_body(receive, limit=MAX_BODY, too_large=RequestTooLarge)
    event = parse_event(body)

    def write() -> str:
        return cells.for_instance(caller).run(
            lambda session: store.record_event(session, caller, event, utcnow()), write=True
        )

    return (await asyncio.to_thread(write)).encode() + b"\n"
