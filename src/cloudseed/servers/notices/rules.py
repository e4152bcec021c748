"""Acknowledged lifecycle notices (2.111), the IO-free core: bounds, statuses, the events a
server keeps, and their stored and shown forms.

A reboot, stop, rebuild or delete may give the server's guest a notice of ``notice_seconds``:
the operation is queued at once, durable as every operation, but no compute agent starts it
before ``not_before`` (the request's time plus the notice) unless the guest acknowledges it
first. Each noticed operation is an *event*, whose id is the operation's uuid. Its status:

    scheduled ──▶ acknowledged ──▶ started ──▶ completed | failed
        │               │
        └───────────────┴──────▶ cancelled   (an admin's reset, a delete)

``scheduled`` lasts until the guest acknowledges the event or an agent takes the operation
(at ``not_before`` at the latest); ``started`` is the agent's claim. Statuses change only when
a row does, never with the clock, so every metadata document that shows them stays cacheable.

The server keeps its latest events (at most ``KEPT``) as JSON in its system metadata
(``SYSTEM_METADATA_KEY``), written in the transaction of each change, beside the operation
row (``not_before``, ``acknowledged_at``) that the agents' claim reads: the server view and
the metadata service read them with the record, with no query of their own.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any

from cloudseed.web.microversions import APIVersion

NOTICES_SINCE = APIVersion(2, 111)
# A day: long enough for any maintenance window an operator announces, short enough that a
# forgotten notice does not hold a server's task for longer.
MAX_NOTICE_SECONDS = 86400
SYSTEM_METADATA_KEY = "scheduled_events"
KEPT = 5  # events a server keeps: its open one and the latest finished ones

SCHEDULED, ACKNOWLEDGED, STARTED = "scheduled", "acknowledged", "started"
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
OPEN = frozenset({SCHEDULED, ACKNOWLEDGED, STARTED})
# What an ended operation's state (servers/lifecycle/queue.py) makes of its event.
ENDED = {"done": COMPLETED, "failed": FAILED, "cancelled": CANCELLED}

# The operation kinds that may carry a notice, and the event type each is shown as.
TYPES = {
    "reboot_soft": "reboot",
    "reboot_hard": "reboot",
    "stop": "stop",
    "rebuild": "rebuild",
    "delete": "delete",
}
EVENT_TYPES = ("reboot", "stop", "rebuild", "delete")

# ``notice_seconds`` in a reboot, os-stop or rebuild body (DELETE takes it as a query parameter).
NOTICE_SECONDS: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": MAX_NOTICE_SECONDS}
# PUT /os-lifecycle-notice-defaults/{project_id}: the whole set, replaced; an absent or null
# type gives no notice by default.
DEFAULTS_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lifecycle_notices": {
            "type": "object",
            "properties": {
                name: {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_NOTICE_SECONDS}
                for name in EVENT_TYPES
            },
            "additionalProperties": False,
        }
    },
    "required": ["lifecycle_notices"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class Event:
    """One noticed operation as its server keeps it. Times are naive UTC."""

    id: str
    type: str
    notice_seconds: int
    not_before: dt.datetime
    status: str = SCHEDULED
    acknowledged_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None

    @property
    def open(self) -> bool:
        return self.status in OPEN


_TIMES = ("not_before", "acknowledged_at", "started_at", "finished_at")


def _time(value: dt.datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if value is not None else None


def _parse_time(value: object) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stored(text: str | None) -> tuple[Event, ...]:
    """A server's events as ``stored`` wrote them (none when it has none)."""
    if not text:
        return ()
    events = []
    for item in json.loads(text):
        times = {name: _parse_time(item.get(name)) for name in _TIMES}
        not_before = times.pop("not_before")
        assert not_before is not None
        events.append(
            Event(
                id=item["id"],
                type=item["type"],
                notice_seconds=int(item["notice_seconds"]),
                not_before=not_before,
                status=item["status"],
                **times,
            )
        )
    return tuple(events)


def stored(events: tuple[Event, ...]) -> str:
    return json.dumps(
        [
            {
                "id": e.id,
                "type": e.type,
                "notice_seconds": e.notice_seconds,
                "status": e.status,
                **{name: _time(getattr(e, name)) for name in _TIMES},
            }
            for e in events
        ],
        sort_keys=True,
    )


def with_event(events: tuple[Event, ...], new: Event) -> tuple[Event, ...]:
    """``events`` and ``new``, oldest first, at most ``KEPT``: the oldest finished ones go first
    (an open event is only dropped if ``KEPT`` open ones followed it, which one task at a time
    never makes)."""
    kept = [*events, new]
    while len(kept) > KEPT:
        finished = next((e for e in kept if not e.open), None)
        kept.remove(finished if finished is not None else kept[0])
    return tuple(kept)


def changed(
    events: tuple[Event, ...], event_id: str, status: str, at: dt.datetime
) -> tuple[Event, ...]:
    """``events`` with ``event_id`` moved to ``status`` at ``at`` (its time of that step set);
    unchanged when it is not there or has already ended."""
    return tuple(_moved(e, status, at) if e.id == event_id and e.open else e for e in events)


def _moved(event: Event, status: str, at: dt.datetime) -> Event:
    if status == ACKNOWLEDGED:
        return replace(event, status=status, acknowledged_at=at)
    if status == STARTED:
        return replace(event, status=status, started_at=at)
    return replace(event, status=status, finished_at=at)


def find(events: tuple[Event, ...], event_id: str) -> Event | None:
    return next((e for e in events if e.id == event_id), None)


def shown_time(value: dt.datetime | None) -> str | None:
    """Times as the API and the OpenStack tree show them: ISO 8601, UTC, whole seconds."""
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def api_view(events: tuple[Event, ...]) -> list[dict[str, Any]]:
    """The server view's ``scheduled_events`` (2.111), oldest first; times to the
    microsecond, as stored (how long an acknowledged event took to start is readable)."""
    return [
        {
            "id": e.id,
            "type": e.type,
            "notice_seconds": e.notice_seconds,
            "status": e.status,
            **{name: _time(getattr(e, name)) for name in _TIMES},
        }
        for e in events
    ]


# -- project defaults ---------------------------------------------------------------------------


def defaults_from_body(body: dict[str, Any]) -> dict[str, int]:
    """The defaults a PUT sets (validated by ``DEFAULTS_BODY``): the types with a notice."""
    return {name: int(value) for name, value in body.items() if value}


def defaults_view(defaults: dict[str, int]) -> dict[str, int | None]:
    return {name: defaults.get(name) for name in EVENT_TYPES}


def parse_defaults(text: str | None) -> dict[str, int]:
    if not text:
        return {}
    found: dict[str, int] = json.loads(text)
    return {name: int(found[name]) for name in EVENT_TYPES if found.get(name)}


def stored_defaults(defaults: dict[str, int]) -> str:
    return json.dumps({name: defaults[name] for name in EVENT_TYPES if defaults.get(name)})
