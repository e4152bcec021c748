"""A guest acknowledges its lifecycle notices (2.111): ``POST /openstack/latest/events.json``
with ``{"acknowledge": ["EVENT_ID", ...]}``.

The server is the caller the metadata service identified, as for the password POST; the body
only names events, and only that server's own are touched (``servers/notices/store.py``).
The answer, ``{"acknowledged": [...]}``, lists the named ids that are the caller's own
acknowledged events: an unknown id and another server's are left out alike, so it tells
nothing about other servers. A replay changes nothing; a body over ``MAX_BODY`` is a 413, a
malformed one a 400, both before anything is written.
"""

from __future__ import annotations

import asyncio
import json

from cloudseed.cells.service import CellDatabases
from cloudseed.metadata import events
from cloudseed.metadata.answers import JSON, Answer
from cloudseed.metadata.errors import AcknowledgementTooLarge
from cloudseed.servers.notices import store as notices
from cloudseed.types import Receive
from cloudseed.web.bodies import whole_body

MAX_BODY = 4096  # 16 ids of 64 characters, quoted and separated, fit with room to spare


async def acknowledge(receive: Receive, *, cells: CellDatabases, uuid: str) -> Answer:
    body = await whole_body(receive, limit=MAX_BODY, too_large=AcknowledgementTooLarge)
    ids = events.acknowledged_ids(body)

    def write() -> list[str]:
        return cells.for_instance(uuid).run(
            lambda session: notices.acknowledge(session, uuid, ids), write=True
        )

    acknowledged = await asyncio.to_thread(write)
    return Answer(200, json.dumps({"acknowledged": acknowledged}).encode(), JSON)
