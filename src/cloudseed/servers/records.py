"""Reading and writing instance rows in a cell database session.

``ServerRecord`` bundles an instance with everything its views need. ``claim_task`` is the
only way an operation starts: one conditional UPDATE that sets ``task_state`` only if it is
empty and ``vm_state`` allows the operation, so of two concurrent operations exactly one wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import (
    BindParameter,
    CompoundSelect,
    Table,
    and_,
    bindparam,
    delete,
    insert,
    literal,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy.orm import Session

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.db.announcements import announce
from cloudseed.db.base import utcnow
from cloudseed.db.in_lists import padded
from cloudseed.db.notify import GUEST_CHANGES, notify
from cloudseed.flavors.snapshots import FlavorSnapshot
from cloudseed.servers import states
from cloudseed.servers.errors import InstanceInvalidState
from cloudseed.servers.models import (
    FixedIP,
    GuestChange,
    Instance,
    InstanceExtra,
    InstanceMetadata,
    InstanceSystemMetadata,
    InstanceTag,
    Port,
)


@dataclass
class ServerRecord:
    instance: Instance
    extra: InstanceExtra
    metadata: dict[str, str]
    system_metadata: dict[str, str]
    ports: list[tuple[Port, list[FixedIP]]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # sorted

    @property
    def keypairs(self) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = json.loads(self.extra.keypairs or "[]")
        return value

    @property
    def flavor(self) -> FlavorSnapshot | None:
        """None for an instance whose flavor was never recorded."""
        return FlavorSnapshot.from_document(self.extra.flavor)

    @property
    def fault(self) -> dict[str, Any] | None:
        return json.loads(self.extra.fault) if self.extra.fault else None


# The statements of a server read, built once: building a select and its cache key for every
# query was a fifth of a server show's CPU. populate_existing: claim_task and friends update
# rows with Core statements, so an object already in the session's identity map must be read
# again, not reused. Metadata rows and tags are only ever read as (kind, uuid, key, value).
_UUIDS: BindParameter[list[str]] = bindparam("uuids", expanding=True)
_LIVE_INSTANCE_AND_EXTRA = (
    select(Instance, InstanceExtra)
    .outerjoin(InstanceExtra, InstanceExtra.instance_uuid == Instance.uuid)
    .where(Instance.uuid == bindparam("uuid"), Instance.deleted == 0)
    .execution_options(populate_existing=True)
)
_LIVE_INSTANCES_AND_EXTRAS = (
    select(Instance, InstanceExtra)
    .outerjoin(InstanceExtra, InstanceExtra.instance_uuid == Instance.uuid)
    .where(Instance.uuid.in_(_UUIDS), Instance.deleted == 0)
    .execution_options(populate_existing=True)
)
_EXTRAS = (
    select(InstanceExtra)
    .where(InstanceExtra.instance_uuid.in_(_UUIDS))
    .execution_options(populate_existing=True)
)
# Metadata, system metadata and tags: (kind, uuid, key, value) rows of one statement, run on
# the session's connection (no ORM entity among them): a third of the statements and about a
# fifth of a server show's database time before.
_METADATA, _SYSTEM_METADATA, _TAG = "m", "s", "t"
_KEYED_ROWS: CompoundSelect[str, str, str, str | None] = union_all(
    select(
        literal(_METADATA),
        InstanceMetadata.instance_uuid,
        InstanceMetadata.key,
        InstanceMetadata.value,
    ).where(InstanceMetadata.instance_uuid.in_(_UUIDS)),
    select(
        literal(_SYSTEM_METADATA),
        InstanceSystemMetadata.instance_uuid,
        InstanceSystemMetadata.key,
        InstanceSystemMetadata.value,
    ).where(InstanceSystemMetadata.instance_uuid.in_(_UUIDS)),
    select(literal(_TAG), InstanceTag.instance_uuid, InstanceTag.tag, null()).where(
        InstanceTag.instance_uuid.in_(_UUIDS)
    ),
)
# Each port with its fixed IPs (the instance's own), in one statement.
_PORTS_AND_IPS = (
    select(Port, FixedIP)
    .outerjoin(
        FixedIP,
        and_(FixedIP.port_uuid == Port.uuid, FixedIP.instance_uuid == Port.instance_uuid),
    )
    .where(Port.instance_uuid.in_(_UUIDS))
    .order_by(Port.id, FixedIP.id)
)


def load(
    session: Session, uuid: str, *, for_update: bool = False, read_deleted: bool = False
) -> ServerRecord:
    """``read_deleted``: a deleted instance too (instance actions from 2.21, as in Nova)."""
    if not read_deleted and not for_update:
        # The instance and its extra in one statement: a server show's hot path.
        row = session.execute(_LIVE_INSTANCE_AND_EXTRA, {"uuid": uuid}).first()
        if row is None:
            raise InstanceNotFound(uuid)
        live, extra = row
        return _records(session, [live], {uuid: extra} if extra is not None else {})[0]
    query = select(Instance).where(Instance.uuid == uuid)
    query = query.execution_options(populate_existing=True)
    if not read_deleted:
        query = query.where(Instance.deleted == 0)
    if for_update:
        query = query.with_for_update()
    instance = session.scalar(query)
    if instance is None:
        raise InstanceNotFound(uuid)
    return load_many(session, [instance])[0]


def load_live(session: Session, uuids: Iterable[str]) -> list[ServerRecord]:
    """Records of the instances among ``uuids`` that exist and are not deleted: each instance
    read with its extra, then ``_records``' two statements (the metadata service's loads and
    the agents' batches)."""
    rows = session.execute(_LIVE_INSTANCES_AND_EXTRAS, {"uuids": padded(uuids)}).all()
    if not rows:
        return []
    extras = {extra.instance_uuid: extra for _, extra in rows if extra is not None}
    return _records(session, [instance for instance, _ in rows], extras)


def load_many(session: Session, instances: list[Instance]) -> list[ServerRecord]:
    """Records for ``instances`` with three queries in all, whatever their number."""
    params = {"uuids": padded([i.uuid for i in instances])}
    extras = {e.instance_uuid: e for e in session.scalars(_EXTRAS, params)}
    return _records(session, instances, extras)


def _records(
    session: Session, instances: list[Instance], extras: dict[str, InstanceExtra]
) -> list[ServerRecord]:
    """The records of ``instances`` whose extras are read already: two more queries. Called
    after an ORM query of the session, which flushed what it held, so the Core statement on
    its connection reads the same rows an ORM one would."""
    uuids = [i.uuid for i in instances]
    params = {"uuids": padded(uuids)}
    metadata: dict[str, dict[str, str]] = {u: {} for u in uuids}
    sysmeta: dict[str, dict[str, str]] = {u: {} for u in uuids}
    tags: dict[str, list[str]] = {u: [] for u in uuids}
    for kind, uuid, key, value in session.connection().execute(_KEYED_ROWS, params):
        if kind == _TAG:
            tags[uuid].append(key)
        else:  # a server metadata value is never NULL; a system metadata one may be
            (metadata if kind == _METADATA else sysmeta)[uuid][key] = value or ""
    ports: dict[str, list[tuple[Port, list[FixedIP]]]] = {u: [] for u in uuids}
    last: Port | None = None
    for port, ip in session.execute(_PORTS_AND_IPS, params):
        if port is not last:
            ports[port.instance_uuid].append((port, []))
            last = port
        if ip is not None:
            ports[port.instance_uuid][-1][1].append(ip)
    return [
        ServerRecord(
            instance=i,
            extra=extras.get(i.uuid) or InstanceExtra(instance_uuid=i.uuid),
            metadata=metadata[i.uuid],
            system_metadata=sysmeta[i.uuid],
            ports=ports[i.uuid],
            tags=sorted(tags[i.uuid]),
        )
        for i in instances
    ]


def claim_task(
    session: Session,
    uuid: str,
    *,
    operation: str,
    task_state: str,
    allowed: tuple[str, ...] | None = None,
    **changes: Any,
) -> None:
    """Atomically start ``operation``: set ``task_state`` (and ``changes``) if the instance is
    idle and in an allowed vm_state; otherwise raise InstanceInvalidState (409)."""
    allowed = allowed if allowed is not None else states.ALLOWED[operation]
    result = session.execute(
        update(Instance)
        .where(
            Instance.uuid == uuid,
            Instance.deleted == 0,
            Instance.task_state.is_(None),
            Instance.vm_state.in_(allowed),
        )
        .values(task_state=task_state, updated_at=utcnow(), **changes)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return
    instance = session.scalar(select(Instance).where(Instance.uuid == uuid, Instance.deleted == 0))
    if instance is None:
        raise InstanceNotFound(uuid)
    if instance.task_state is not None:
        raise InstanceInvalidState(
            uuid=uuid, operation=operation, attr="task_state", state=instance.task_state
        )
    raise InstanceInvalidState(
        uuid=uuid, operation=operation, attr="vm_state", state=instance.vm_state
    )


# Instance columns a rebuild holds in its operation's payload and applies when it succeeds.
REBUILD_COLUMNS = frozenset(
    {
        "image_ref",
        "display_name",
        "hostname",
        "display_description",
        "key_name",
        "key_data",
        "access_ip_v4",
        "access_ip_v6",
    }
)


def overlay(record: ServerRecord, payload: dict[str, Any]) -> ServerRecord:
    """``record`` as an operation with ``payload`` will leave it: its pending columns, user
    data, key pair snapshot and metadata shown. For a record no longer in a session (it is
    changed in place and must never be flushed)."""
    for column, value in payload.get("apply", {}).items():
        if column in REBUILD_COLUMNS:
            setattr(record.instance, column, value)
    if "user_data" in payload:
        record.instance.user_data = payload["user_data"][0]
    if "metadata" in payload:
        record.metadata = dict(payload["metadata"])
    if "keypairs" in payload:
        record.extra.keypairs = json.dumps(payload["keypairs"], sort_keys=True)
    return record


def set_extra(session: Session, uuid: str, **documents: Any) -> None:
    extra = session.scalar(select(InstanceExtra).where(InstanceExtra.instance_uuid == uuid))
    if extra is None:
        extra = InstanceExtra(instance_uuid=uuid)
        session.add(extra)
    for name, value in documents.items():
        setattr(extra, name, None if value is None else json.dumps(value, sort_keys=True))


def set_system_metadata(session: Session, uuid: str, key: str, value: str | None) -> None:
    """Set one system metadata item of ``uuid`` (None: remove it), in the caller's
    transaction. Not a change guests see: the caller says so when it is one."""
    item = (InstanceSystemMetadata.instance_uuid == uuid, InstanceSystemMetadata.key == key)
    if value is None:
        session.execute(delete(InstanceSystemMetadata).where(*item))
        return
    row = session.scalar(select(InstanceSystemMetadata).where(*item))
    if row is None:
        session.add(InstanceSystemMetadata(instance_uuid=uuid, key=key, value=value))
    else:
        row.value = value


# A change feed row (its changed_at the column's default), many in one executemany: an ORM
# object each cost a flush's bookkeeping per row in a storm of builds.
_FEED_ROW = insert(cast(Table, GuestChange.__table__))


def guest_changed(session: Session, uuid: str) -> None:
    """Record that what the guest would see has changed: bump the generation and write to the
    change feed, in the caller's transaction, so every metadata worker drops its copy."""
    guests_changed(session, [uuid])


def guests_changed(session: Session, uuids: list[str]) -> None:
    """``guest_changed`` for many guests with one UPDATE."""
    if not uuids:
        return
    session.execute(
        update(Instance)
        .where(Instance.uuid.in_(padded(uuids)))
        .values(generation=Instance.generation + 1, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.execute(_FEED_ROW, [{"instance_uuid": uuid, "boot": False} for uuid in uuids])
    # In this process at once (a metadata service drops its copy before the request that made
    # the change answers); other processes read the change feed: at once on PostgreSQL (one
    # NOTIFY per transaction, delivered only if it commits), at their next poll elsewhere.
    if announce(session, GUEST_CHANGES, uuids):
        notify(session, GUEST_CHANGES, "")


def guests_booting(session: Session, uuids: list[str]) -> None:
    """Tell the metadata workers, through the change feed and in the caller's transaction,
    that these instances' guests have just begun to boot: each worker loads them ahead, so
    the boot's first requests find them cached. No change of what the guests see (the
    generation stays), so nothing cached is dropped and no long-poll wakes."""
    if not uuids:
        return
    session.execute(_FEED_ROW, [{"instance_uuid": uuid, "boot": True} for uuid in uuids])
    notify(session, GUEST_CHANGES, "")  # PostgreSQL's workers read the feed at once
