"""Changing a server's tags (``/servers/{id}/tags``, 2.26): service functions that take the
``Session`` and never commit (the route owns the transaction, ``servers.api.requests.in_cell``).

As in Nova, tags change only while the server is active, paused, suspended or stopped: a
building, errored or deleted server refuses with 409 whatever its task. The server's lock is
not asked (Nova's tags API does not ask it either). Every change is a change the guest could
see (its tags reach the metadata service, issue 35), so it bumps the server's generation and
writes to the change feed in the same transaction.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from cloudseed.servers import records, states, tags
from cloudseed.servers.errors import InstanceInvalidState
from cloudseed.servers.models import InstanceTag

# Nova's vm_states.ACTIVE, PAUSED, SUSPENDED, STOPPED; cloudseed's guests are never paused or
# suspended, but a server reset to one of them by hand keeps Nova's answer.
CHANGEABLE = frozenset({states.ACTIVE, "paused", "suspended", states.STOPPED})


def listed(session: Session, uuid: str) -> list[str]:
    """The server's tags, sorted (Nova lists them in no promised order)."""
    return sorted(session.scalars(select(InstanceTag.tag).where(InstanceTag.instance_uuid == uuid)))


def _changeable(session: Session, uuid: str, operation: str) -> None:
    """The server, locked for the change, in a state that lets its tags change (else 409,
    Nova's ``Cannot 'update tag' instance ... while it is in vm_state building``)."""
    instance = records.load(session, uuid, for_update=True).instance
    if instance.vm_state not in CHANGEABLE:
        raise InstanceInvalidState(
            uuid=uuid, operation=operation, attr="vm_state", state=instance.vm_state
        )


def replace(session: Session, uuid: str, wanted: list[str]) -> list[str]:
    """``PUT /servers/{id}/tags``: exactly ``wanted`` (duplicates once); the tags after."""
    _changeable(session, uuid, "update tags")
    current = set(listed(session, uuid))
    target = set(wanted)
    gone = current - target
    if gone:
        session.execute(
            delete(InstanceTag).where(
                InstanceTag.instance_uuid == uuid, InstanceTag.tag.in_(sorted(gone))
            )
        )
    session.add_all([InstanceTag(instance_uuid=uuid, tag=t) for t in sorted(target - current)])
    session.flush()
    records.guest_changed(session, uuid)
    return sorted(target)


def add(session: Session, uuid: str, tag: str) -> bool:
    """``PUT /servers/{id}/tags/{tag}``: True when the tag is new (201), False when the server
    had it (204). Nova's order of checks: the state (409), the tag (400), the count (400, even
    when the server already has the tag)."""
    _changeable(session, uuid, "update tag")
    tags.check_path_tag(tag)
    current = listed(session, uuid)
    if len(current) >= tags.MAX_TAGS:
        raise tags.too_many()
    if tag in current:
        return False
    session.add(InstanceTag(instance_uuid=uuid, tag=tag))
    session.flush()
    records.guest_changed(session, uuid)
    return True


def remove(session: Session, uuid: str, tag: str) -> bool:
    """``DELETE /servers/{id}/tags/{tag}``: False when the server has no such tag (404)."""
    _changeable(session, uuid, "delete tag")
    result = session.execute(
        delete(InstanceTag).where(InstanceTag.instance_uuid == uuid, InstanceTag.tag == tag)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    records.guest_changed(session, uuid)
    return True


def remove_all(session: Session, uuid: str) -> None:
    """``DELETE /servers/{id}/tags``."""
    _changeable(session, uuid, "delete tags")
    result = session.execute(delete(InstanceTag).where(InstanceTag.instance_uuid == uuid))
    if result.rowcount:  # type: ignore[attr-defined]
        records.guest_changed(session, uuid)
