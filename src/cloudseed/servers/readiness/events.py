"""cloud-init's reporting events, as its ``webhook`` handler posts them. IO-free.

With ``reporting: {NAME: {type: webhook, endpoint: URL}}`` in its configuration, cloud-init
(22.4 to today, ``cloudinit/reporting/handlers.py``) posts every event to URL as it happens,
one event per request, from a thread that sends them in order: the body is
``json.dumps(event.as_dict())`` and no Content-Type, a failed post is not retried. An event is::

    {"name": "modules-config/config-runcmd", "description": "running config-runcmd with
     frequency once-per-instance", "event_type": "start" | "finish", "origin": "cloudinit",
     "timestamp": 1732840000.123, "result": "SUCCESS" | "WARN" | "FAIL"}

``result`` only on a finish; ``files`` (base64 file contents some datasources attach to a
finish) is ignored. ``name`` is a path: the stage (``init-local``, ``init-network``,
``modules-config``, ``modules-final``; ``single/NAME`` for ``cloud-init single --report``)
then its steps (``check-cache``, ``consume-user-data``, ``search-<DataSource>``) and its modules
(``config-<module>``). A step's or module's failure makes its stage finish with FAIL too.

What is checked here, before anything is stored: UTF-8 JSON of at most ``MAX_BODY`` bytes, an
object, ``name`` and ``event_type`` present, every string without NUL and lone surrogates
(PostgreSQL refuses the one, UTF-8 the other) and within its length, ``timestamp`` a finite
number of seconds between 1970 and 9999, ``result`` one of cloud-init's three. Unknown keys
are ignored, so a newer cloud-init's additions do not make its events refused.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from typing import Any

from cloudseed.servers.readiness.errors import InvalidBootEvent

# cloud-init's events are a few hundred bytes; room for a long description, and bounded so a
# burst of posts cannot make a metadata worker hold much.
MAX_BODY = 16 * 1024
MAX_NAME = 255
MAX_ORIGIN = 64
MAX_DESCRIPTION = 2048
START, FINISH = "start", "finish"
SUCCESS, WARN, FAIL = "SUCCESS", "WARN", "FAIL"
RESULTS = frozenset({SUCCESS, WARN, FAIL})
CLOUD_INIT = "cloudinit"  # cloud-init's origin, the only one whose stages make the status

# The boot's stages in the order they run; "modules-init" is not one (cloud-init says so).
STAGES = ("init-local", "init-network", "modules-config", "modules-final")
LAST_STAGE = STAGES[-1]
MODULE_PREFIX = "config-"
_LATEST = 253402300799.0  # 9999-12-31T23:59:59Z, the last second a timestamp column holds


@dataclass(frozen=True, slots=True)
class BootEvent:
    name: str
    event_type: str  # start | finish
    origin: str
    description: str
    timestamp: float  # the guest's clock, POSIX seconds
    result: str | None  # finish only

    @property
    def stage(self) -> str:
        """The top-level part of the name (``modules-config`` of ``modules-config/config-x``)."""
        return self.name.split("/", 1)[0]

    @property
    def rank(self) -> int | None:
        """Where the stage runs in a boot (0 for init-local); None for what is no boot stage
        or not cloud-init's."""
        if self.origin != CLOUD_INIT or self.stage not in STAGES:
            return None
        return STAGES.index(self.stage)

    @property
    def is_stage(self) -> bool:
        return "/" not in self.name

    @property
    def failed(self) -> bool:
        return self.event_type == FINISH and self.result == FAIL

    @property
    def what_failed(self) -> str:
        """The module a failure names: ``runcmd`` for ``modules-config/config-runcmd``, the
        step (``consume-user-data``) or the stage itself otherwise."""
        leaf = self.name.rsplit("/", 1)[-1]
        return leaf.removeprefix(MODULE_PREFIX) if "/" in self.name else leaf

    @property
    def guest_time(self) -> dt.datetime:
        """``timestamp`` as naive UTC, to the microsecond (how it is stored and compared)."""
        return dt.datetime.fromtimestamp(self.timestamp, dt.UTC).replace(tzinfo=None)


def parse_event(body: bytes) -> BootEvent:
    """The event in ``body``; InvalidBootEvent (400) when it is none."""
    if len(body) > MAX_BODY:
        raise InvalidBootEvent(f"A boot report event is at most {MAX_BODY} bytes.")
    try:
        text = body.decode("utf-8")
        value: Any = json.loads(text)
    except UnicodeDecodeError:
        raise InvalidBootEvent("The event is not UTF-8.") from None
    except (ValueError, RecursionError):
        # ValueError covers JSON errors and integers past Python's digit limit.
        raise InvalidBootEvent(
            "The event is not JSON (cloud-init's webhook posts one JSON object per event)."
        ) from None
    if not isinstance(value, dict):
        raise InvalidBootEvent("The event is not a JSON object.")
    event_type = _text(value, "event_type", 16, required=True)
    if event_type not in (START, FINISH):
        raise InvalidBootEvent("event_type must be start or finish.")
    result = None
    if event_type == FINISH:
        result = _text(value, "result", 16, required=True)
        if result not in RESULTS:
            raise InvalidBootEvent("result must be SUCCESS, WARN or FAIL.")
    name = _text(value, "name", MAX_NAME, required=True)
    if not name or any(not part for part in name.split("/")):
        raise InvalidBootEvent("name must be a path of non-empty parts.")
    return BootEvent(
        name=name,
        event_type=event_type,
        origin=_text(value, "origin", MAX_ORIGIN) or "",
        description=_text(value, "description", MAX_DESCRIPTION) or "",
        timestamp=_timestamp(value.get("timestamp")),
        result=result,
    )


def _text(value: dict[str, Any], field: str, limit: int, *, required: bool = False) -> str:
    found = value.get(field)
    if found is None:
        if required:
            raise InvalidBootEvent(f"The event has no {field}.")
        return ""
    if not isinstance(found, str):
        raise InvalidBootEvent(f"{field} must be a string.")
    if len(found) > limit:
        raise InvalidBootEvent(f"{field} is longer than {limit} characters.")
    if "\x00" in found:
        raise InvalidBootEvent(f"{field} holds a NUL character.")
    try:
        found.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidBootEvent(f"{field} holds a lone surrogate.") from None
    return found


def _timestamp(found: Any) -> float:
    # bool is an int to Python, and never a time.
    if isinstance(found, bool) or not isinstance(found, int | float):
        raise InvalidBootEvent("timestamp must be a number of seconds (cloud-init's time.time()).")
    try:
        seconds = float(found)
    except OverflowError:  # an integer past a float's range
        raise InvalidBootEvent("timestamp is not a time between 1970 and 9999.") from None
    if not math.isfinite(seconds) or not 0 < seconds <= _LATEST:
        raise InvalidBootEvent("timestamp is not a time between 1970 and 9999.")
    return seconds
