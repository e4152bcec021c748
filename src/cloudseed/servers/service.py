"""Changing servers in ways that start a driver operation: rebuild, reboot, stop, start,
delete (and the console, which asks the driver).

``Servers`` is a coordinator, the one exception to the house rule that service functions take
a Session and the caller owns the transaction (docs/architecture.md, "Transactions"). It opens
its own transactions because each change spans the API database and the instance's cell
database, and because the background operation may only start once the change is committed
(the operation's worker thread reads the instance in a transaction of its own). Inside, it
calls Session-taking functions (``records``, ``history``, ``action_log``, ``edits``).

Every change claims the task first (409 when busy) and, in the same transaction, writes what
the request changes: key pair snapshot with ``key_name`` and ``key_data`` together, user data,
the history, the instance action. The background operation then only records its outcome.
Changes that start no operation and touch one cell database are in ``edits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, update

from cloudseed.cells.models import InstanceMapping
from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.images import service as images
from cloudseed.networks import service as networks
from cloudseed.servers import action_log, edits, history, personality, records, states
from cloudseed.servers.console import console_tail
from cloudseed.servers.creation import keypair_of
from cloudseed.servers.edits import UNSET
from cloudseed.servers.history import Actor
from cloudseed.servers.models import FixedIP, Instance, Port
from cloudseed.servers.operations import Operations
from cloudseed.settings import QuotaSection


@dataclass(frozen=True)
class Servers:
    """The server coordinator: the API database, the cells, and the background operations."""

    api_db: Database
    cells: CellDatabases
    operations: Operations

    def rebuild(
        self,
        uuid: str,
        *,
        actor: Actor,
        image_ref: str,
        name: str | None = None,
        metadata: dict[str, str] | None = None,
        key_name: Any = UNSET,
        user_data: Any = UNSET,
        hostname: str | None = None,
        description: Any = UNSET,
        admin_password: str | None = None,
        files: personality.Encoded = (),
        quota: QuotaSection | None = None,
    ) -> records.ServerRecord:
        """``admin_password`` and ``files`` go to the new config drive, in memory only."""
        with self.api_db.read() as session:
            image = images.get_image(session, image_ref)
            image_uuid = image.uuid
            # The caller's limits, as Nova checks them (the request context's project).
            personality.check_limits(
                session,
                files,
                project_id=actor.project_id,
                user_id=actor.user_id,
                quota=quota or QuotaSection(),
            )
            snapshot = (
                keypair_of(session, user_id=actor.user_id, key_name=key_name)
                if key_name not in (UNSET, None)
                else []
            )
        with self.cells.for_instance(uuid).write() as session:
            before = records.load(session, uuid)
            flavor = before.flavor
            images.check_flavor_fits(
                image, root_gb=int(flavor.get("disk") or 0), memory_mb=int(flavor.get("ram") or 0)
            )
            # Described now: the record's objects change with the writes below.
            old_key = history.describe_key(before.keypairs)
            old_user_data = history.describe_user_data(before.instance.user_data)
            final_state = (
                states.STOPPED if before.instance.vm_state == states.STOPPED else states.ACTIVE
            )
            changes: dict[str, Any] = {"image_ref": image_uuid}
            if name is not None:
                changes["display_name"] = name
            if hostname is not None:
                changes["hostname"] = hostname
            if description is not UNSET:
                changes["display_description"] = description
            if key_name is not UNSET:
                changes.update(
                    key_name=key_name, key_data=snapshot[0]["public_key"] if snapshot else None
                )
            if user_data is not UNSET:
                changes["user_data"] = user_data
            records.claim_task(
                session, uuid, operation="rebuild", task_state=states.REBUILDING, **changes
            )
            records.guest_changed(session, uuid)
            if key_name is not UNSET:
                records.set_extra(session, uuid, keypairs=snapshot)
                history.record(
                    session,
                    instance_uuid=uuid,
                    field="key_pair",
                    action="rebuild",
                    actor=actor,
                    old=old_key,
                    new=history.describe_key(snapshot),
                )
            if user_data is not UNSET:
                history.record(
                    session,
                    instance_uuid=uuid,
                    field="user_data",
                    action="rebuild",
                    actor=actor,
                    old=old_user_data,
                    new=history.describe_user_data(user_data),
                )
            if metadata is not None:
                edits.replace_metadata(session, uuid, metadata)
            action_id = action_log.start(
                session,
                instance_uuid=uuid,
                action="rebuild",
                actor=actor,
                event="compute_rebuild_instance",
            )
            session.flush()
            record = records.load(session, uuid)
        self.operations.rebuild(
            uuid,
            action_id,
            final_vm_state=final_state,
            admin_password=admin_password,
            files=personality.decode(files),
        )
        return record

    def reboot(self, uuid: str, *, actor: Actor, hard: bool, user_data: Any = UNSET) -> None:
        operation = "reboot_hard" if hard else "reboot_soft"
        with self.cells.for_instance(uuid).write() as session:
            before = records.load(session, uuid)
            records.claim_task(
                session,
                uuid,
                operation=operation,
                task_state=states.REBOOTING_HARD if hard else states.REBOOTING,
            )
            details = None
            if user_data is not UNSET:
                # Applied when the reboot (and, with a config drive, its rebuild) succeeds.
                details = "user_data " + (history.describe_user_data(user_data) or "null")
                history.record(
                    session,
                    instance_uuid=uuid,
                    field="user_data",
                    action="reboot",
                    actor=actor,
                    old=history.describe_user_data(before.instance.user_data),
                    new=history.describe_user_data(user_data),
                )
            action_id = action_log.start(
                session,
                instance_uuid=uuid,
                action="reboot",
                actor=actor,
                event="compute_reboot_instance",
                details=details,
            )
        self.operations.reboot(
            uuid,
            action_id,
            hard=hard,
            pending_user_data=None if user_data is UNSET else (user_data,),
        )

    def stop(self, uuid: str, *, actor: Actor) -> None:
        self._simple(uuid, actor, "stop", states.POWERING_OFF, self.operations.stop)

    def start(self, uuid: str, *, actor: Actor) -> None:
        self._simple(uuid, actor, "start", states.POWERING_ON, self.operations.start)

    def _simple(self, uuid: str, actor: Actor, operation: str, task_state: str, run: Any) -> None:
        event = f"compute_{operation}_instance"
        with self.cells.for_instance(uuid).write() as session:
            records.claim_task(session, uuid, operation=operation, task_state=task_state)
            action_id = action_log.start(
                session, instance_uuid=uuid, action=operation, actor=actor, event=event
            )
        run(uuid, action_id)

    def delete(self, uuid: str, *, actor: Actor) -> None:
        """Delete at once in the database (the address is free again, the metadata service no
        longer answers for it); the guest is destroyed in the background."""
        cell = self.cells.for_instance(uuid)
        with cell.write() as session:
            instance = records.load(session, uuid, for_update=True).instance
            now = utcnow()
            session.execute(delete(FixedIP).where(FixedIP.instance_uuid == uuid))
            session.execute(delete(Port).where(Port.instance_uuid == uuid))
            session.execute(
                update(Instance)
                .where(Instance.uuid == uuid)
                .values(
                    deleted=instance.id,
                    deleted_at=now,
                    terminated_at=now,
                    vm_state=states.DELETED,
                    task_state=None,
                    updated_at=now,
                )
                .execution_options(synchronize_session=False)
            )
            records.guest_changed(session, uuid)
            action_log.start(session, instance_uuid=uuid, action="delete", actor=actor)
        with self.api_db.write() as session:
            networks.release(session, instance_uuid=uuid)
            session.execute(
                update(InstanceMapping)
                .where(InstanceMapping.instance_uuid == uuid)
                .values(queued_for_delete=True, updated_at=utcnow())
            )
        self.operations.destroy(uuid)

    def console_output(self, uuid: str, *, length: int | None) -> str:
        """The end of the guest's console log, as ``os-getConsoleOutput`` returns it."""
        return console_tail(self.operations.driver.console_output(uuid), length)


__all__ = ["Servers"]
