"""Instance action bodies (``os-instance-actions``), per microversion and role, as Nova's
``InstanceActionsController`` formats them:

- ``updated_at`` on actions from 2.58;
- events: administrators always (with ``traceback``); everyone else from 2.51, without it;
- ``hostId`` on events from 2.62 for everyone, ``host`` from 2.62 for administrators;
- ``details`` on events from 2.84 (Nova's ``events:details`` policy: project reader or admin).

An event's host is the instance's host: cloudseed runs every operation of an instance on the
compute host the instance is on (there is no migration), so that is where each event ran.
"""

from __future__ import annotations

from typing import Any

from cloudseed.servers.views import host_id
from cloudseed.web.microversions import APIVersion

V = APIVersion
UPDATED_AT_SINCE = V(2, 58)
EVENTS_FOR_EVERYONE_SINCE = V(2, 51)
EVENT_HOST_SINCE = V(2, 62)
EVENT_DETAILS_SINCE = V(2, 84)

_ACTION_KEYS = ("action", "instance_uuid", "request_id", "user_id", "project_id", "start_time")


def _time(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def action(record: dict[str, Any], version: APIVersion) -> dict[str, Any]:
    body = {key: record[key] for key in _ACTION_KEYS}
    body["start_time"] = _time(record["start_time"])
    body["message"] = record["message"]
    if version >= UPDATED_AT_SINCE:
        body["updated_at"] = _time(record["updated_at"])
    return body


def action_with_events(
    record: dict[str, Any],
    version: APIVersion,
    *,
    admin: bool,
    host: str | None,
    instance_project_id: str,
) -> dict[str, Any]:
    """``record`` is ``action_log.show_action``'s; ``host`` is the instance's host."""
    body = action(record, version)
    if not admin and version < EVENTS_FOR_EVERYONE_SINCE:
        return body
    # Nova hashes the host with the action's project (the instance's when there is none).
    hashed = host_id(record["project_id"] or instance_project_id, host)
    events = []
    for raw in record["events"]:
        event: dict[str, Any] = {
            "event": raw["event"],
            "start_time": _time(raw["start_time"]),
            "finish_time": _time(raw["finish_time"]),
            "result": raw["result"],
        }
        if admin:
            event["traceback"] = raw["traceback"]
        if version >= EVENT_HOST_SINCE:
            if admin:
                event["host"] = host or ""
            event["hostId"] = hashed
        if version >= EVENT_DETAILS_SINCE:
            event["details"] = raw["details"]
        events.append(event)
    body["events"] = events
    return body
