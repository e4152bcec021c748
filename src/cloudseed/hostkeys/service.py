"""Host key reports in a cell database session: record them, and say which keys a server has.

Session-taking functions; the caller owns the transaction (the metadata app for phone_home,
the compute agent's console watch, API routes and the CLI for reading).

Which keys a server has: those of the accepted report of its current boot generation (the
instance's ``launched_at``), the phone_home one if there is one, else the console one. A report
of an earlier generation describes a disk that is gone, so it is never shown; a server not yet
launched, or whose guest has not reported, has none. ``fingerprints`` is the same as SHA-256
fingerprints, for whatever vouches for the guest (the identity token).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.hostkeys.errors import NotLaunched, TooManyReports
from cloudseed.hostkeys.key_lines import HostKey, same_keys
from cloudseed.hostkeys.models import (
    ACCEPTED,
    BASELINE,
    CONSOLE,
    PHONE_HOME,
    HostKeyReport,
)
from cloudseed.hostkeys.phone_home import PhoneHome
from cloudseed.servers import states
from cloudseed.servers.models import Instance

log = logging.getLogger(__name__)

# Repeats kept per boot generation: a guest that posts in a loop cannot fill the database.
MAX_REPEATS = 20
REPEAT = "repeat"


@dataclass(frozen=True, slots=True)
class ShownKey:
    key: HostKey
    source: str  # phone_home | console
    recorded_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Watched:
    """A launched instance whose guest has not reported its keys in this generation."""

    uuid: str
    launched_at: dt.datetime
    baseline: tuple[HostKey, ...] | None  # the console block seen when it began, if looked


def host_keys(session: Session, instance_uuid: str) -> list[ShownKey]:
    """The keys the server has now, as reported; [] when there are none (yet)."""
    instance = _live(session, instance_uuid)
    if instance.launched_at is None:
        return []
    rows = {
        row.source: row
        for row in session.scalars(
            select(HostKeyReport).where(
                HostKeyReport.instance_uuid == instance_uuid,
                HostKeyReport.launched_at == instance.launched_at,
                HostKeyReport.role == ACCEPTED,
            )
        )
    }
    row = rows.get(PHONE_HOME) or rows.get(CONSOLE)
    if row is None:
        return []
    return [ShownKey(key, row.source, row.recorded_at) for key in _keys(row)]


def fingerprints(session: Session, instance_uuid: str) -> list[str]:
    """SHA-256 fingerprints (``SHA256:...``) of the server's accepted host keys, in the order
    reported; [] when it has none yet."""
    return [shown.key.fingerprint_sha256 for shown in host_keys(session, instance_uuid)]


def record_phone_home(session: Session, instance_uuid: str, report: PhoneHome) -> str:
    """Store ``report`` (already checked to be the caller's own): ``"accepted"`` for the first
    of its boot generation, ``"repeat"`` for a later one, which is kept and never shown."""
    instance = _live(session, instance_uuid)
    generation = _generation(instance)

    def row(role: str | None) -> HostKeyReport:
        return HostKeyReport(
            instance_uuid=instance_uuid,
            launched_at=generation,
            source=PHONE_HOME,
            role=role,
            hostname=report.hostname,
            fqdn=report.fqdn,
            keys=_dump(report.keys),
        )

    if _insert(session, row(ACCEPTED)):
        return ACCEPTED
    repeats = session.scalar(
        select(func.count(HostKeyReport.id)).where(
            HostKeyReport.instance_uuid == instance_uuid,
            HostKeyReport.launched_at == generation,
            HostKeyReport.source == PHONE_HOME,
            HostKeyReport.role.is_(None),
        )
    )
    if (repeats or 0) >= MAX_REPEATS:
        raise TooManyReports(instance_uuid, MAX_REPEATS)
    accepted = _accepted(session, instance_uuid, generation, PHONE_HOME)
    if accepted is not None and not same_keys(_keys(accepted), report.keys):
        log.warning(
            "instance %s reported other host keys again in the boot launched at %s; the "
            "first report (%s) stands",
            instance_uuid,
            generation.isoformat(),
            accepted.recorded_at.isoformat(),
        )
    session.add(row(None))
    session.flush()
    return REPEAT


def awaiting_console(
    session: Session, *, host: str, since: dt.datetime, limit: int
) -> list[Watched]:
    """Running instances of ``host`` launched at ``since`` or later whose current generation has
    no accepted report (of either source), newest first, at most ``limit``."""
    reported = (
        select(HostKeyReport.id)
        .where(
            HostKeyReport.instance_uuid == Instance.uuid,
            HostKeyReport.launched_at == Instance.launched_at,
            HostKeyReport.role == ACCEPTED,
        )
        .exists()
    )
    found = session.execute(
        select(Instance.uuid, Instance.launched_at)
        .where(
            Instance.host == host,
            Instance.deleted == 0,
            Instance.vm_state == states.ACTIVE,
            Instance.task_state.is_(None),
            Instance.launched_at >= since,
            ~reported,
        )
        .order_by(Instance.launched_at.desc())
        .limit(limit)
    ).all()
    if not found:
        return []
    baselines = {
        (row.instance_uuid, row.launched_at): tuple(_keys(row))
        for row in session.scalars(
            select(HostKeyReport).where(
                HostKeyReport.instance_uuid.in_([uuid for uuid, _ in found]),
                HostKeyReport.source == CONSOLE,
                HostKeyReport.role == BASELINE,
            )
        )
    }
    return [Watched(uuid, at, baselines.get((uuid, at))) for uuid, at in found if at is not None]


def record_console(
    session: Session,
    instance_uuid: str,
    *,
    launched_at: dt.datetime,
    keys: tuple[HostKey, ...],
    baseline: bool,
) -> bool:
    """Store the console's keys for the generation ``launched_at``: as its baseline (what the
    console showed when the generation was first looked at, possibly nothing), or as its
    accepted console report. False when someone else stored it first, or the instance has
    moved on to another generation (nothing is stored then)."""
    instance = _live(session, instance_uuid)
    try:
        generation = _generation(instance)
    except NotLaunched:
        return False
    if generation != launched_at:
        return False
    row = HostKeyReport(
        instance_uuid=instance_uuid,
        launched_at=generation,
        source=CONSOLE,
        role=BASELINE if baseline else ACCEPTED,
        keys=_dump(keys),
    )
    return _insert(session, row)


# -- the pieces ------------------------------------------------------------------------------


def _live(session: Session, instance_uuid: str) -> Instance:
    instance = session.scalar(
        select(Instance).where(Instance.uuid == instance_uuid, Instance.deleted == 0)
    )
    if instance is None:
        raise InstanceNotFound(instance_uuid)
    return instance


def _generation(instance: Instance) -> dt.datetime:
    """The boot generation a report from the guest belongs to now; NotLaunched while there is
    none to belong to (a build not finished) or it is being replaced (a rebuild running: the
    old guest may still be up, and must not speak for the new disk)."""
    if instance.launched_at is None:
        raise NotLaunched(instance.uuid, "has not finished building")
    if instance.task_state == states.REBUILDING:
        raise NotLaunched(instance.uuid, "is being rebuilt")
    return instance.launched_at


def _insert(session: Session, row: HostKeyReport) -> bool:
    """Insert ``row`` unless its role in its generation and source is taken: the unique
    constraint decides, in a savepoint, so the caller's transaction goes on either way."""
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        return False
    return True


def _accepted(
    session: Session, instance_uuid: str, generation: dt.datetime, source: str
) -> HostKeyReport | None:
    return session.scalar(
        select(HostKeyReport).where(
            HostKeyReport.instance_uuid == instance_uuid,
            HostKeyReport.launched_at == generation,
            HostKeyReport.source == source,
            HostKeyReport.role == ACCEPTED,
        )
    )


def _dump(keys: tuple[HostKey, ...] | list[HostKey]) -> str:
    return json.dumps([k.as_dict() for k in keys])


def _keys(row: HostKeyReport) -> list[HostKey]:
    return [HostKey.from_dict(value) for value in json.loads(row.keys)]
