"""Boot reports in a cell database session: take a guest's event, its phone_home, a reboot
through the API; read a server's report. Session-taking; the caller owns the transaction (the
metadata app for the guest's posts, the compute agent for reboots, API routes for reading).

Every write first locks the instance row (``SELECT ... FOR UPDATE``; SQLite serializes its
writers anyway), so two workers taking events of one guest at once apply them one after the
other: the read-modify-write of the progress and the repeat check see each other's result.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.servers import records
from cloudseed.servers.models import Instance, InstanceSystemMetadata
from cloudseed.servers.readiness import progress as p
from cloudseed.servers.readiness.errors import BootNotBegun
from cloudseed.servers.readiness.events import BootEvent
from cloudseed.servers.readiness.models import BootReportEvent

PROGRESS_KEY = p.PROGRESS_KEY
# Events kept per server: a Debian 12 first boot posts about 120; past the cap events still
# move the status, and are counted (``dropped``), not kept.
MAX_EVENTS = 256
ACCEPTED, REPEAT, STALE = "accepted", "repeat", "stale"


@dataclass(frozen=True, slots=True)
class Report:
    progress: p.Progress | None  # None: no boot generation to report on (building, rebuilding)
    events: list[BootReportEvent]


def record_event(session: Session, instance_uuid: str, event: BootEvent, now: dt.datetime) -> str:
    """Take ``event`` posted by instance ``instance_uuid`` (already identified as the caller):
    ``accepted``, ``repeat`` (kept already: nothing changes) or ``stale`` (older than what the
    guest reported since: ignored)."""
    instance = _locked(session, instance_uuid)
    generation = p.generation_of(instance.launched_at, instance.task_state)
    if generation is None:
        why = "has not finished building" if instance.launched_at is None else "is being rebuilt"
        raise BootNotBegun(instance_uuid, why)
    progress = p.load(_stored(session, instance_uuid), generation)
    if _kept_already(session, instance_uuid, progress, event):
        return REPEAT
    verdict = p.verdict(progress, event)
    if verdict == p.STALE:
        return STALE
    if verdict == p.NEW_BOOT:
        progress = progress.next_boot()
    if progress.events == 0:  # a boot begins here: the kept events of any other go
        _forget_events(session, instance_uuid)
    kept = progress.events < MAX_EVENTS
    if kept:
        session.add(
            BootReportEvent(
                instance_uuid=instance_uuid,
                generation=generation,
                boot=progress.boot,
                name=event.name,
                event_type=event.event_type,
                result=event.result,
                origin=event.origin,
                description=event.description,
                guest_time=event.guest_time,
                received_at=now,
            )
        )
    _store(session, instance_uuid, p.advance(progress, event, now, kept=kept))
    return ACCEPTED


def phone_home_accepted(session: Session, instance_uuid: str, now: dt.datetime) -> None:
    """The guest's phone_home report of its current generation was accepted (hostkeys/): a
    signal of a finished boot for a guest that sends no webhook events."""
    instance = _locked(session, instance_uuid)
    generation = p.generation_of(instance.launched_at, instance.task_state)
    if generation is None:
        return
    progress = p.load(_stored(session, instance_uuid), generation)
    _store(session, instance_uuid, p.phoned_home(progress, now))


def boot_began(session: Session, instance_uuid: str) -> None:
    """A reboot or a start has just booted the guest again (the compute agent, in the
    transaction recording it): the server's status is pending until the guest reports this
    boot, and reports older than the last one taken are stale."""
    instance = _locked(session, instance_uuid)
    generation = p.generation_of(instance.launched_at, instance.task_state)
    if generation is None:
        return
    progress = p.load(_stored(session, instance_uuid), generation)
    if progress.reported:  # several reboots before the guest reports are one pending boot
        _store(session, instance_uuid, progress.next_boot())


def report(session: Session, instance_uuid: str) -> Report:
    """The server's latest reported boot with its kept events, oldest first."""
    instance = session.scalar(
        select(Instance).where(Instance.uuid == instance_uuid, Instance.deleted == 0)
    )
    if instance is None:
        raise InstanceNotFound(instance_uuid)
    generation = p.generation_of(instance.launched_at, instance.task_state)
    if generation is None:
        return Report(None, [])
    progress = p.load(_stored(session, instance_uuid), generation)
    events = session.scalars(
        select(BootReportEvent)
        .where(
            BootReportEvent.instance_uuid == instance_uuid,
            BootReportEvent.generation == generation,
            BootReportEvent.boot == progress.boot,
        )
        .order_by(BootReportEvent.id)
    )
    return Report(progress, list(events))


# -- the pieces ------------------------------------------------------------------------------


def _locked(session: Session, instance_uuid: str) -> Instance:
    instance = session.scalar(
        select(Instance)
        .where(Instance.uuid == instance_uuid, Instance.deleted == 0)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if instance is None:
        raise InstanceNotFound(instance_uuid)
    return instance


def _stored(session: Session, instance_uuid: str) -> str | None:
    return session.scalar(
        select(InstanceSystemMetadata.value).where(
            InstanceSystemMetadata.instance_uuid == instance_uuid,
            InstanceSystemMetadata.key == PROGRESS_KEY,
        )
    )


def _store(session: Session, instance_uuid: str, progress: p.Progress) -> None:
    # Not a change the guest sees: no guest_changed, its documents stay as they are.
    records.set_system_metadata(session, instance_uuid, PROGRESS_KEY, progress.dump())


def _kept_already(
    session: Session, instance_uuid: str, progress: p.Progress, event: BootEvent
) -> bool:
    found = session.scalar(
        select(BootReportEvent.id)
        .where(
            BootReportEvent.instance_uuid == instance_uuid,
            BootReportEvent.generation == progress.generation,
            BootReportEvent.boot == progress.boot,
            BootReportEvent.name == event.name,
            BootReportEvent.event_type == event.event_type,
            BootReportEvent.guest_time == event.guest_time,
        )
        .limit(1)
    )
    return found is not None


def _forget_events(session: Session, instance_uuid: str) -> None:
    session.execute(delete(BootReportEvent).where(BootReportEvent.instance_uuid == instance_uuid))
