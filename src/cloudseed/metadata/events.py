"""What a guest reads of its lifecycle notices (2.111, ``servers/notices/``): IO-free.

``/openstack/latest/events.json``: ``{"events": [{"id", "type", "not_before", "status"}]}``,
oldest first, the server's kept events (its open one and the latest ended ones). EC2's tree,
as EC2 shows its scheduled events: ``meta-data/events/maintenance/scheduled`` the open ones and
``.../history`` the ended ones, each a JSON list of ``{"Code", "Description", "EventId",
"NotBefore", "NotAfter", "State"}`` with EC2's dates (``21 Jan 2019 09:00:43 GMT``), codes and
states (``active``, ``completed``, ``canceled``; a failed operation's event is ``completed``
with ``[Failed]`` in its description). ``NotAfter`` is the latest the operation starts for an
open event (cloudseed's operations have no planned end) and when it ended for an ended one.

Both are long-pollable (``metadata/freshness.py``) and tagged by their bytes, so a watcher
wakes when an event changes, not at every change of its server.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from cloudseed.errors import InvalidInput
from cloudseed.metadata.errors import NoSuchDocument
from cloudseed.servers.notices import rules

# EC2's event codes for cloudseed's event types.
EC2_CODES = {
    "reboot": "instance-reboot",
    "stop": "instance-stop",
    "rebuild": "system-maintenance",
    "delete": "instance-retirement",
}
_EC2_ENDED = {
    rules.COMPLETED: ("completed", "[Completed] "),
    rules.FAILED: ("completed", "[Failed] "),
    rules.CANCELLED: ("canceled", "[Canceled] "),
}
EC2_MAINTENANCE = b"history\nscheduled"


def openstack(events: tuple[rules.Event, ...]) -> bytes:
    shown = [
        {
            "id": e.id,
            "type": e.type,
            "not_before": rules.shown_time(e.not_before),
            "status": e.status,
        }
        for e in events
    ]
    return json.dumps({"events": shown}, sort_keys=True).encode()


def _ec2_time(value: dt.datetime) -> str:
    return value.strftime("%d %b %Y %H:%M:%S GMT")


def _ec2_event(e: rules.Event) -> dict[str, Any]:
    description = f"scheduled {e.type}"
    if e.status == rules.ACKNOWLEDGED:
        description += ", acknowledged by the instance"
    state, prefix = _EC2_ENDED.get(e.status, ("active", ""))
    ended = e.finished_at if not e.open and e.finished_at is not None else e.not_before
    return {
        "Code": EC2_CODES[e.type],
        "Description": prefix + description,
        "EventId": e.id,
        "NotBefore": _ec2_time(e.not_before),
        "NotAfter": _ec2_time(ended),
        "State": state,
    }


def ec2(events: tuple[rules.Event, ...], rest: tuple[str, ...]) -> bytes:
    """``meta-data/events/<rest>``: a listing or a JSON list (NoSuchDocument elsewhere)."""
    if not rest:
        return b"maintenance/"
    if rest == ("maintenance",):
        return EC2_MAINTENANCE
    if rest == ("maintenance", "scheduled"):
        return json.dumps([_ec2_event(e) for e in events if e.open], indent=2).encode()
    if rest == ("maintenance", "history"):
        return json.dumps([_ec2_event(e) for e in events if not e.open], indent=2).encode()
    raise NoSuchDocument("no such events path")


# An acknowledgement names at most this many ids, each at most this long (ours are uuids).
MAX_ACKNOWLEDGED = 16
MAX_ID = 64
# What an id may hold: ours are uuids; nothing else (no NUL, no lone surrogate) reaches a query.
_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
_ACK_FORM = 'The body must be {"acknowledge": ["EVENT_ID", ...]} with 1 to 16 event ids.'


def acknowledged_ids(body: bytes) -> list[str]:
    """The event ids a ``POST /openstack/latest/events.json`` body acknowledges, or
    InvalidInput (400) for anything else. The message never repeats what was sent."""
    try:
        parsed = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidInput("The body is not valid JSON.") from None
    ids = parsed.get("acknowledge") if isinstance(parsed, dict) and len(parsed) == 1 else None
    if (
        not isinstance(ids, list)
        or not 1 <= len(ids) <= MAX_ACKNOWLEDGED
        or not all(isinstance(i, str) and _ID.fullmatch(i) for i in ids)
    ):
        raise InvalidInput(_ACK_FORM)
    return ids
