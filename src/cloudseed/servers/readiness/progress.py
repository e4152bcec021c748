"""A server's boot, as its guest reported it: the status the API shows, and how each report
moves it. IO-free.

One ``Progress`` per server, for the latest boot its guest reported, kept as JSON in the
server's system metadata (``store.py``). It belongs to a boot generation, the instance's
``launched_at`` (set when a build or rebuild succeeds: a new disk, ``hostkeys`` calls it the
same), and counts the boots within it (``boot``): a reboot or a start through the API begins
the next one (``next_boot``), and so does a guest that reboots itself, recognised by its
reports (``verdict``). A progress of another generation is the past: the server shows
``pending`` until its new disk's guest reports.

Statuses: ``pending`` (nothing reported in this boot), ``running`` (cloud-init has reported),
``done`` (``modules-final`` finished without a failure: the last stage, when cloud-init writes
``boot-finished``), ``failed`` (a FAIL result in a boot stage; ``failed_module`` names the first:
``runcmd`` for ``modules-config/config-runcmd``, else the step or stage). A failure is final
for the boot: cloud-init goes on with the next modules, but the boot did not do what it was
told. cloud-init's ``phone_home`` module (near the end of ``modules-final``, once per
instance) counts as ``done`` for a guest that sends no webhook events: it cannot report a
failure, so webhook events, when there are any, decide.

Order and replays, judged by the guest's own clock (cloud-init posts a boot's events in order,
one stage after the other, and never again): an event of a stage earlier than the furthest one
reported, or of a stage that has finished, is a new boot when it is newer than every event of
this boot, and ``stale`` (ignored) otherwise; any event no newer than the last of an earlier
boot (``floor``) is stale too. Repeats of a kept event are found by ``store.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from cloudseed.servers import states
from cloudseed.servers.readiness.events import FINISH, LAST_STAGE, BootEvent

# The system metadata item holding a server's progress (JSON); guests never see it.
PROGRESS_KEY = "boot_progress"
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
WEBHOOK, PHONE_HOME = "webhook", "phone_home"
# What an event is to the boot in progress.
THIS_BOOT, NEW_BOOT, STALE = "this boot", "new boot", "stale"


def generation_of(launched_at: dt.datetime | None, task_state: str | None) -> str | None:
    """The boot generation reports belong to now; None while there is none (a build not
    finished) or it is being replaced (a rebuild running: the old guest may still be up)."""
    if launched_at is None or task_state == states.REBUILDING:
        return None
    return launched_at.strftime("%Y-%m-%dT%H:%M:%S.%f")


def server_time(now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Progress:
    generation: str
    boot: int = 1
    status: str = PENDING
    failed_module: str | None = None
    source: str | None = None  # webhook | phone_home: what the status was taken from
    stage: str | None = None  # the furthest boot stage reported
    rank: int = -1  # its place in events.STAGES
    finished_rank: int = -1  # the furthest stage whose own finish came
    last_timestamp: float | None = None  # guest clock: the newest event of this boot
    floor: float | None = None  # guest clock: the newest event of the boots before it
    started_at: str | None = None  # server clock: the boot's first report
    updated_at: str | None = None  # server clock: the last report taken
    events: int = 0  # kept (store.MAX_EVENTS at most)
    dropped: int = 0  # taken into the status, not kept
    phone_home_at: str | None = None

    def dump(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"))

    def next_boot(self) -> Progress:
        """The boot after this one: nothing reported yet, older events stale."""
        newest = [t for t in (self.floor, self.last_timestamp) if t is not None]
        return Progress(self.generation, self.boot + 1, floor=max(newest, default=None))

    @property
    def reported(self) -> bool:
        return self.source is not None or self.events > 0 or self.dropped > 0


def load(text: str | None, generation: str) -> Progress:
    """The stored progress if it is of ``generation``, else a new one (pending)."""
    if text:
        try:
            fields: Any = json.loads(text)
            found = Progress(**fields)
        except (ValueError, TypeError):
            found = None  # never written by this code: start over rather than fail
        if found is not None and found.generation == generation:
            return found
    return Progress(generation)


def verdict(progress: Progress, event: BootEvent) -> str:
    """What ``event`` is to ``progress`` (see the module's docstring)."""
    if progress.floor is not None and event.timestamp <= progress.floor:
        return STALE
    rank = event.rank
    if rank is None or progress.rank < 0:
        return THIS_BOOT
    earlier = rank < progress.rank or rank <= progress.finished_rank
    if not earlier:
        return THIS_BOOT
    last = progress.last_timestamp
    return NEW_BOOT if last is None or event.timestamp > last else STALE


def advance(progress: Progress, event: BootEvent, now: dt.datetime, *, kept: bool) -> Progress:
    """``progress`` with ``event`` (of this boot) taken."""
    changes: dict[str, Any] = {
        "updated_at": server_time(now),
        "started_at": progress.started_at or server_time(now),
        "last_timestamp": max(event.timestamp, progress.last_timestamp or event.timestamp),
        "events": progress.events + kept,
        "dropped": progress.dropped + (not kept),
    }
    rank = event.rank
    if rank is not None:
        status = progress.status
        if progress.source != WEBHOOK:  # the first webhook event: it decides from now on
            status, changes["source"] = RUNNING, WEBHOOK
        if rank > progress.rank:
            changes.update(stage=event.stage, rank=rank)
        if event.is_stage and event.event_type == FINISH:
            changes["finished_rank"] = max(rank, progress.finished_rank)
        if event.failed and status != FAILED:
            status, changes["failed_module"] = FAILED, event.what_failed
        elif event.is_stage and event.event_type == FINISH and event.stage == LAST_STAGE:
            status = FAILED if status == FAILED else DONE
        changes["status"] = status
    return dataclasses.replace(progress, **changes)


def phoned_home(progress: Progress, now: dt.datetime) -> Progress:
    """``progress`` once the guest's phone_home report came: ``done`` unless webhook events
    tell more."""
    at = server_time(now)
    if progress.source == WEBHOOK:
        return dataclasses.replace(progress, phone_home_at=at)
    return dataclasses.replace(
        progress,
        status=DONE,
        source=PHONE_HOME,
        phone_home_at=at,
        started_at=progress.started_at or at,
        updated_at=at,
    )


def shown(stored: str | None, generation: str | None) -> dict[str, Any]:
    """The server view's ``bootstrap_status`` (2.110) for the stored progress."""
    if generation is None:
        return {"status": PENDING, "failed_module": None, "updated_at": None}
    progress = load(stored, generation)
    return {
        "status": progress.status,
        "failed_module": progress.failed_module,
        "updated_at": progress.updated_at,
    }
