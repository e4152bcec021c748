"""Changes to a server that start no driver operation and touch only its cell database:
name, description, hostname, user data (without a config drive), its availability zone pin,
and metadata items.

These are service functions in the house rule: they take the ``Session`` and never commit;
the caller (the route, through ``servers.api.requests.in_cell``) owns the transaction.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.quotas.service import within as quota_within
from cloudseed.servers import records
from cloudseed.servers.creation import pinning
from cloudseed.servers.errors import (
    InstanceHasConfigDrive,
    InstanceInvalidState,
    TooManyMetadataItems,
)
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.history import bootstrap as history
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.models import InstanceMetadata


class Unset(Enum):
    """A field not in the request (the server keeps it), as opposed to None ("set to null")."""

    UNSET = "unset"


UNSET: Final = Unset.UNSET


def update(
    session: Session,
    uuid: str,
    *,
    actor: Actor,
    name: str | None = None,
    description: str | Unset | None = UNSET,
    hostname: str | None = None,
    user_data: str | Unset | None = UNSET,
    access_ip_v4: str | None = None,
    access_ip_v6: str | None = None,
    pinned_availability_zone: str | Unset | None = UNSET,
) -> records.ServerRecord:
    record = records.load(session, uuid, for_update=True)
    instance = record.instance
    if pinned_availability_zone is not UNSET:
        # Checked first: a refused pin changes nothing else either.
        pin = pinning.repinned(
            record.system_metadata.get(pinning.PINNED_AZ),
            pinned_availability_zone,
            current=pinning.current_zone(instance.availability_zone),
        )
        records.set_system_metadata(session, uuid, pinning.PINNED_AZ, pin)
    if name is not None:
        instance.display_name = name
    if access_ip_v4 is not None:
        instance.access_ip_v4 = access_ip_v4
    if access_ip_v6 is not None:
        instance.access_ip_v6 = access_ip_v6
    if description is not UNSET:
        instance.display_description = description
    if hostname is not None:
        instance.hostname = hostname
    if user_data is not UNSET:
        if instance.config_drive:
            raise InstanceHasConfigDrive(uuid)
        if instance.task_state is not None:
            raise InstanceInvalidState(
                uuid=uuid,
                operation="update_user_data",
                attr="task_state",
                state=instance.task_state,
            )
        old = history.describe_user_data(instance.user_data)
        instance.user_data = user_data
        history.record(
            session,
            instance_uuid=uuid,
            field="user_data",
            action="update",
            actor=actor,
            old=old,
            new=history.describe_user_data(user_data),
        )
        action_id = action_log.start(
            session,
            instance_uuid=uuid,
            action="update_user_data",
            actor=actor,
            event="api_update_user_data",
        )
        action_log.finish(session, action_id=action_id, event="api_update_user_data")
    instance.updated_at = utcnow()
    session.flush()
    # The guest sees its name and hostname (meta_data.json) and its user data.
    if name is not None or hostname is not None or user_data is not UNSET:
        records.guest_changed(session, uuid)
    return records.load(session, uuid)


def set_metadata(
    session: Session, uuid: str, items: dict[str, str], *, replace: bool, limit: int = -1
) -> dict[str, str]:
    """Replace the metadata items (PUT) or merge into them (POST); the items afterwards.
    ``limit``: the caller's ``metadata_items`` quota (-1: none); more items are a 403."""
    records.load(session, uuid, for_update=True)
    wanted = dict(items) if replace else {**metadata(session, uuid), **items}
    check_metadata_items(limit, wanted)
    replace_metadata(session, uuid, wanted)
    records.guest_changed(session, uuid)
    return metadata(session, uuid)


def check_metadata_items(limit: int, items: dict[str, str]) -> None:
    """Nova's ``metadata_items`` check (the metadata API, create, rebuild): more items than
    ``limit`` (-1: no limit) is a 403."""
    if not quota_within(limit, len(items)):
        raise TooManyMetadataItems(limit)


def delete_metadata_item(session: Session, uuid: str, key: str) -> bool:
    """False when there was no such key."""
    records.load(session, uuid, for_update=True)
    result = session.execute(
        delete(InstanceMetadata).where(
            InstanceMetadata.instance_uuid == uuid, InstanceMetadata.key == key
        )
    )
    if result.rowcount:  # type: ignore[attr-defined]
        records.guest_changed(session, uuid)
        return True
    return False


def metadata(session: Session, uuid: str) -> dict[str, str]:
    return {
        row.key: row.value
        for row in session.scalars(
            select(InstanceMetadata).where(InstanceMetadata.instance_uuid == uuid)
        )
    }


def replace_metadata(session: Session, uuid: str, items: dict[str, str]) -> None:
    session.execute(delete(InstanceMetadata).where(InstanceMetadata.instance_uuid == uuid))
    for key, value in items.items():
        session.add(InstanceMetadata(instance_uuid=uuid, key=key, value=value))
    session.flush()
