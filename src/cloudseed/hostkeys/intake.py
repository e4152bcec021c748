"""The metadata service's side of a phone_home report: read the body (bounded), check it whole
(``phone_home.py``), then store it in a worker thread (``service.py``); an accepted report also
tells readiness that the boot has come to its end (``servers/readiness/``). The caller has been
identified, and its session token checked, exactly as for every metadata request before this is
called (``metadata/app.py``); a refusal raises before anything is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.hostkeys import phone_home, service
from cloudseed.hostkeys.models import ACCEPTED
from cloudseed.servers.readiness import store as readiness
from cloudseed.types import Receive
from cloudseed.web.bodies import whole_body
from cloudseed.web.errors import RequestTooLarge


async def take_report(
    receive: Receive,
    headers: Sequence[tuple[bytes, bytes]],
    *,
    caller: str,
    cells: CellDatabases,
) -> bytes:
    """Take the report ``caller`` posts; the answer's body: ``accepted`` for the first of its
    boot generation, ``repeat`` for a later one (kept, never shown). RequestTooLarge (413)
    past ``phone_home.MAX_BODY``, with the rest of the body unread."""
    body = await whole_body(receive, limit=phone_home.MAX_BODY, too_large=RequestTooLarge)
    content_type = next((v.decode("latin-1") for n, v in headers if n == b"content-type"), None)
    report = phone_home.parse_report(body, content_type, caller=caller)

    def record(session: Session) -> str:
        role = service.record_phone_home(session, caller, report)
        if role == ACCEPTED:  # the boot's end, for readiness (2.110) when nothing tells more
            readiness.phone_home_accepted(session, caller, utcnow())
        return role

    def write() -> str:
        return cells.for_instance(caller).run(record, write=True)

    return (await asyncio.to_thread(write)).encode() + b"\n"
