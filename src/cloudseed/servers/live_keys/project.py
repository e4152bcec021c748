"""Project keys (2.106): key pairs an administrator attaches to a project, so that every server
of the project gets them (GCE's project ssh-keys), unless the server blocks them.

``replace`` is a coordinator (docs/architecture.md, "Transactions"): the list is written in the
API database, then fanned out to the project's servers in one transaction per cell, each
server whose key set changes getting what every key change brings (``live_keys.change``: a new
generation, a history row, a queued ``keys`` operation). A cell whose transaction fails keeps
the old keys on its servers until the next change of the list, and the error reaches the
caller. A server whose create read the list just before it changed, and whose instance row
was not yet committed when the fan-out looked, keeps the list it read until the next change.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import and_, delete, false, select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.engines import Database
from cloudseed.db.in_lists import padded
from cloudseed.errors import InvalidInput
from cloudseed.keypairs.models import KeyPair, ProjectKey
from cloudseed.servers import records
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys import store as live_keys
from cloudseed.servers.live_keys.delivery import parse_time
from cloudseed.servers.live_keys.sets import KeyRequest
from cloudseed.servers.models import Instance, InstanceExtra


@dataclass(frozen=True)
class ProjectKeyView:
    """One project key as the API shows it: the key pair's values when it still exists."""

    name: str
    user_id: str
    expires_at: str | None
    created_at: str
    type: str | None
    fingerprint: str | None
    fingerprint_sha256: str | None

    def body(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "user_id": self.user_id,
            "type": self.type,
            "fingerprint": self.fingerprint,
            "fingerprint_sha256": self.fingerprint_sha256,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
        }


def listed(session: Session, project_id: str) -> list[ProjectKeyView]:
    """The project's keys in order (API database). A key pair its owner deleted since stays
    listed, without key values, so the administrator sees what to remove."""
    rows = session.execute(
        select(ProjectKey, KeyPair)
        .outerjoin(
            KeyPair,
            and_(KeyPair.user_id == ProjectKey.user_id, KeyPair.name == ProjectKey.key_name),
        )
        .where(ProjectKey.project_id == project_id)
        .order_by(ProjectKey.position, ProjectKey.id)
    )
    return [
        ProjectKeyView(
            name=pk.key_name,
            user_id=pk.user_id,
            expires_at=key_sets.format_time(pk.expires_at) if pk.expires_at else None,
            created_at=key_sets.format_time(pk.created_at),
            type=keypair.type if keypair else None,
            fingerprint=keypair.fingerprint if keypair else None,
            fingerprint_sha256=keypair.fingerprint_sha256 if keypair else None,
        )
        for pk, keypair in rows
    ]


def _store(session: Session, project_id: str, requests: tuple[KeyRequest, ...]) -> None:
    """Replace the project's list; every key pair must exist (400 naming the first that
    does not)."""
    for r in requests:
        exists = session.scalar(
            select(KeyPair.id).where(KeyPair.user_id == r.user_id, KeyPair.name == r.name)
        )
        if exists is None:
            raise InvalidInput(
                f"Invalid input for field/attribute project_keys. User {r.user_id} has no key "
                f"pair {r.name}."
            )
    session.execute(delete(ProjectKey).where(ProjectKey.project_id == project_id))
    session.flush()
    for position, r in enumerate(requests):
        assert r.user_id is not None  # project_key_requests always names the owner
        session.add(
            ProjectKey(
                project_id=project_id,
                user_id=r.user_id,
                key_name=r.name,
                position=position,
                expires_at=parse_time(r.expires_at) if r.expires_at else None,
            )
        )
    session.flush()


def replace(
    api_db: Database,
    cells: CellDatabases,
    project_id: str,
    requests: tuple[KeyRequest, ...],
    *,
    actor: Actor,
) -> tuple[list[ProjectKeyView], int]:
    """Set the project's keys and fan them out; the new list and how many servers changed."""

    def store(session: Session) -> list[ProjectKeyView]:
        _store(session, project_id, requests)
        return listed(session, project_id)

    shown = api_db.run(store, write=True)
    # Each server reads the list with its row locked (live_keys.change), so of two PUTs
    # fanning out at once the last committed list is the one every server ends with.
    project = live_keys.project_reader(api_db, project_id)
    changed = 0
    for cell in cells.all_cells():
        # A fan-out the database rolled back to break a deadlock (a guest's delivery record
        # or an agent held a row the other way round) left nothing behind: it runs again.
        changed += cell.run(
            partial(fan_out, project_id=project_id, project=project, actor=actor),
            write=True,
            attempts=DEADLOCK_ATTEMPTS,
        )
    return shown, changed


# A cell's fan-out is run again this many times in all when the database breaks a deadlock.
DEADLOCK_ATTEMPTS = 3
# Servers written per flush: bounds the objects a fan-out holds at once in a large project.
FAN_OUT_BATCH = 500


def fan_out(
    session: Session, project_id: str, project: live_keys.ProjectKeys, *, actor: Actor
) -> int:
    """Give every server of the project in this cell that takes project keys the project's
    keys as ``project`` reads them; how many changed. Every such row is locked first, then the
    list is read once: a list committed meanwhile is read here or fanned out after this
    transaction (as ``live_keys.change`` does for one server)."""
    uuids = session.scalars(
        select(Instance.uuid)
        .join(InstanceExtra, InstanceExtra.instance_uuid == Instance.uuid)
        .where(
            Instance.project_id == project_id,
            Instance.deleted == 0,
            InstanceExtra.block_project_keys == false(),
        )
        .order_by(Instance.id)
    ).all()
    # The instance rows only, in id order, as ``live_keys.change`` locks one: the same order
    # for every writer of a server's keys.
    instances = [
        instance
        for start in range(0, len(uuids), FAN_OUT_BATCH)
        for instance in session.scalars(
            select(Instance)
            .where(
                Instance.uuid.in_(padded(uuids[start : start + FAN_OUT_BATCH])),
                Instance.deleted == 0,
            )
            .order_by(Instance.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ]
    if not instances:
        return 0
    project_part = project()
    changed = 0
    for start in range(0, len(instances), FAN_OUT_BATCH):
        batch = records.load_many(session, instances[start : start + FAN_OUT_BATCH])
        batch = [r for r in batch if not r.extra.block_project_keys]  # changed before the lock
        changed += live_keys.project_changed(session, batch, project_part, actor=actor)
    return changed


__all__ = ["ProjectKeyView", "fan_out", "listed", "replace"]
