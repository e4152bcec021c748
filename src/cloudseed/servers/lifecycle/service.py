"""Changing servers in ways that start a driver operation: rebuild, reboot, stop, start,
delete (and the console, which asks the driver or reads what the agent stored).

``Servers`` is a coordinator, the one exception to the house rule that service functions take
a Session and the caller owns the transaction (docs/architecture.md, "Transactions"). It opens
its own transactions because each change spans the API database and the instance's cell
database. Inside, it calls Session-taking functions (``records``, ``queue``, ``action_log``,
``edits``).

Every change claims the task first (409 when busy) and, in the same transaction, queues the
operation (``queue.enqueue``) and starts the instance action, so an accepted request always has
its work queued. The values the operation applies (a rebuild's key pair, user data, name,
hostname, metadata and image; a HARD reboot's user data) travel in the operation's payload and
are written by the compute agent, with their history, only when it succeeds: until then the
guest is served the previous values. Changes that start no operation are in ``edits``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.errors import Forbidden
from cloudseed.images import service as images
from cloudseed.images.models import Image
from cloudseed.images.visibility import Viewer
from cloudseed.quotas import service as quotas
from cloudseed.servers import records, states
from cloudseed.servers.creation import personality, zero_disk
from cloudseed.servers.errors import ConsoleNotAvailable
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.history import bootstrap as history
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle import console_tails, deletion, edits, queue
from cloudseed.servers.lifecycle.console import console_tail
from cloudseed.servers.lifecycle.edits import UNSET, Unset
from cloudseed.servers.lifecycle.rebuild_request import RebuildRequest
from cloudseed.servers.live_keys import sets as key_sets
from cloudseed.servers.live_keys import store as live_keys
from cloudseed.servers.models import Instance
from cloudseed.servers.notices import store as notices

# System metadata of a locked instance, as Nova keeps them (locked_by is a column there).
LOCKED_BY = "locked_by"
LOCKED_REASON = "locked_reason"


@dataclass(frozen=True)
class Servers:
    """The server coordinator: the API database and the cells."""

    api_db: Database
    cells: CellDatabases
    # The console of guests on this node's own compute host (None: no local agent).
    local_console: Callable[[str], str] | None = None
    local_host: str | None = None

    def rebuild(self, uuid: str, request: RebuildRequest) -> records.ServerRecord:
        """Queue the rebuild; returns the record as the rebuild will leave it."""
        actor = request.actor
        with self.api_db.read() as session:
            image, own = _rebuild_checked(session, request)
        payload = _rebuild_payload(request, image_uuid=image.uuid)
        apply: dict[str, Any] = payload["apply"]

        def claim(session: Session) -> tuple[records.ServerRecord, int]:
            # Run again after a deadlock: what it puts in payload and apply is the same each
            # time (keys overwritten, never appended).
            before = records.load(session, uuid)
            flavor = before.flavor
            images.check_flavor_fits(
                image,
                root_gb=flavor.root_gb if flavor else 0,
                memory_mb=flavor.memory_mb if flavor else 0,
            )
            zero_disk.refuse_zero_disk_flavor_unless_admin(
                root_gb=flavor.root_gb if flavor else 0, admin=request.admin
            )
            payload["final_vm_state"] = (
                states.STOPPED if before.instance.vm_state == states.STOPPED else states.ACTIVE
            )
            # The whole key set as the rebuild leaves it (2.106: a new generation, which the
            # new disk boots with), shown in the answer; when it succeeds the agent keeps the
            # server's own part and takes the project's keys of that moment (live_keys).
            generation = (before.extra.keys_generation or 1) + 1
            current = before.keypairs
            project = [] if before.extra.block_project_keys else key_sets.of_project(current)
            keypairs = [
                {**e, "since_generation": generation}
                for e in key_sets.merge(key_sets.own(current) if own is None else own, project)
            ]
            payload["keypairs"] = keypairs
            if own is not None:
                key_name_now, key_data = key_sets.first_key(keypairs)
                apply.update(key_name=key_name_now, key_data=key_data)
            records.claim_task(session, uuid, operation="rebuild", task_state=states.REBUILDING)
            action_id = action_log.start(
                session,
                instance_uuid=uuid,
                action="rebuild",
                actor=actor,
                event="compute_rebuild_instance",
            )
            queue.enqueue(
                session,
                instance_uuid=uuid,
                kind="rebuild",
                host=before.instance.host,
                action_id=action_id,
                payload=payload,
                notice_seconds=_notice(request.notice_seconds, before.instance),
            )
            session.flush()
            return records.load(session, uuid), generation

        record, generation = self.cells.for_instance(uuid).run(claim, write=True)
        record = records.overlay(record, payload)
        # Shown as it will be: a new key generation, which the new guest has yet to get.
        record.extra.keys_generation = generation
        return record

    def reboot(
        self,
        uuid: str,
        *,
        actor: Actor,
        hard: bool,
        user_data: str | Unset | None = UNSET,
        notice_seconds: int = 0,
    ) -> None:
        operation = "reboot_hard" if hard else "reboot_soft"

        def claim_reboot(session: Session) -> None:
            instance = records.load(session, uuid).instance
            records.claim_task(
                session,
                uuid,
                operation=operation,
                task_state=states.REBOOTING_HARD if hard else states.REBOOTING,
            )
            payload: dict[str, Any] = {"actor": _actor(actor)}
            details = None
            if user_data is not UNSET:
                # Applied, with its history, when the reboot (and its drive) succeeds.
                payload["user_data"] = [user_data]
                details = "user_data " + (history.describe_user_data(user_data) or "null")
            payload["details"] = details
            action_id = action_log.start(
                session,
                instance_uuid=uuid,
                action="reboot",
                actor=actor,
                event="compute_reboot_instance",
                details=details,
            )
            queue.enqueue(
                session,
                instance_uuid=uuid,
                kind=operation,
                host=instance.host,
                action_id=action_id,
                payload=payload,
                notice_seconds=_notice(notice_seconds, instance),
            )

        self.cells.for_instance(uuid).run(claim_reboot, write=True)

    def stop(self, uuid: str, *, actor: Actor, notice_seconds: int = 0) -> None:
        self._simple(uuid, actor, "stop", states.POWERING_OFF, notice_seconds)

    def start(self, uuid: str, *, actor: Actor) -> None:
        self._simple(uuid, actor, "start", states.POWERING_ON)

    def _simple(
        self, uuid: str, actor: Actor, operation: str, task_state: str, notice_seconds: int = 0
    ) -> None:
        event = f"compute_{operation}_instance"

        def claim_simple(session: Session) -> None:
            instance = records.load(session, uuid).instance
            records.claim_task(session, uuid, operation=operation, task_state=task_state)
            action_id = action_log.start(
                session, instance_uuid=uuid, action=operation, actor=actor, event=event
            )
            queue.enqueue(
                session,
                instance_uuid=uuid,
                kind=operation,
                host=instance.host,
                action_id=action_id,
                notice_seconds=_notice(notice_seconds, instance),
            )

        self.cells.for_instance(uuid).run(claim_simple, write=True)

    def reset_state(self, uuid: str, *, actor: Actor, state: str) -> None:
        """``os-resetState``: set vm_state (active or error), clear the task, and cancel the
        instance's open operations, so an agent still working on one cannot overwrite the
        reset (its lease is gone; it records nothing)."""

        def reset(session: Session) -> None:
            records.load(session, uuid, for_update=True)
            cancelled = queue.cancel_open(session, uuid, reason=f"reset to {state} by an admin")
            session.execute(
                update(Instance)
                .where(Instance.uuid == uuid, Instance.deleted == 0)
                .values(vm_state=state, task_state=None, updated_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            action_id = action_log.start(
                session,
                instance_uuid=uuid,
                action="resetState",
                actor=actor,
                event="api_reset_state",
                details=f"state {state}; {cancelled} open operation(s) cancelled",
            )
            # Done with the request itself: nothing else would ever finish its event.
            action_log.finish(session, action_id=action_id, event="api_reset_state")

        self.cells.for_instance(uuid).run(reset, write=True)

    def lock(self, uuid: str, *, actor: Actor, by_admin: bool, reason: str | None) -> None:
        """``lock``: Nova's ``locked``, ``locked_by`` (owner or admin) and ``locked_reason``."""

        def lock_in_cell(session: Session) -> None:
            records.load(session, uuid, for_update=True)
            self._set_lock(session, uuid, locked=True)
            records.set_system_metadata(session, uuid, LOCKED_BY, "admin" if by_admin else "owner")
            records.set_system_metadata(session, uuid, LOCKED_REASON, reason)
            action_log.start(session, instance_uuid=uuid, action="lock", actor=actor)

        self.cells.for_instance(uuid).run(lock_in_cell, write=True)

    def unlock(self, uuid: str, *, actor: Actor, by_admin: bool) -> None:
        """``unlock``: a lock an administrator took is theirs to lift (403 for the owner)."""

        def unlock_in_cell(session: Session) -> None:
            record = records.load(session, uuid, for_update=True)
            if record.system_metadata.get(LOCKED_BY) == "admin" and not by_admin:
                raise Forbidden(
                    "Policy doesn't allow os_compute_api:os-lock-server:unlock:unlock_override "
                    "to be performed."
                )
            self._set_lock(session, uuid, locked=False)
            records.set_system_metadata(session, uuid, LOCKED_BY, None)
            records.set_system_metadata(session, uuid, LOCKED_REASON, None)
            action_log.start(session, instance_uuid=uuid, action="unlock", actor=actor)

        self.cells.for_instance(uuid).run(unlock_in_cell, write=True)

    @staticmethod
    def _set_lock(session: Session, uuid: str, *, locked: bool) -> None:
        session.execute(
            update(Instance)
            .where(Instance.uuid == uuid, Instance.deleted == 0)
            .values(locked=locked, updated_at=utcnow())
            .execution_options(synchronize_session=False)
        )

    def delete(self, uuid: str, *, actor: Actor, notice_seconds: int = 0) -> None:
        """Delete at once in the database (the address is free again, the metadata service no
        longer answers for it); the guest is destroyed by its host's agent, through a queued
        destroy that replaces whatever the instance had open. With a notice that applies
        (2.111), the agent deletes it when the notice ends (``deletion.schedule``)."""
        cell = self.cells.for_instance(uuid)

        def delete_in_cell(session: Session) -> bool:
            instance = records.load(session, uuid, for_update=True).instance
            host = instance.host
            if host is not None and notices.applies(
                notice_seconds, vm_state=instance.vm_state, host=host
            ):
                deletion.schedule(
                    session,
                    uuid,
                    actor=actor,
                    host=host,
                    notice_seconds=notice_seconds,
                    actor_payload=_actor(actor),
                )
                return False
            deletion.delete_in_cell(session, uuid)
            action_log.start(session, instance_uuid=uuid, action="delete", actor=actor)
            return True

        if cell.run(delete_in_cell, write=True):
            self.api_db.run(lambda session: deletion.release_mapping(session, uuid), write=True)

    def console_output(self, uuid: str, *, length: int | None) -> str:
        """The end of the guest's console log, as ``os-getConsoleOutput`` returns it: from the
        driver when this node runs the instance's host (fresh), else the tail its agent
        stored in the cell database (``console_tails``: at most ``[compute]
        console_tail_interval`` old); ConsoleNotAvailable when there is neither."""
        with self.cells.for_instance(uuid).read() as session:
            host = records.load(session, uuid).instance.host
            local = self.local_console is not None and host == self.local_host
            stored = None if local else console_tails.read(session, uuid)
        if local:
            assert self.local_console is not None
            return console_tail(self.local_console(uuid), length)
        if stored is None:
            raise ConsoleNotAvailable(uuid)
        return console_tail(stored, length)


def _rebuild_checked(
    session: Session, request: RebuildRequest
) -> tuple[Image, list[dict[str, Any]] | None]:
    """A rebuild's checks in the API database: the image it boots (which the caller may see),
    its metadata and files within the caller's limits (as Nova checks them: the request
    context's project), and the server's own keys the request names (None: unchanged)."""
    actor = request.actor
    image = images.bootable_image(
        session,
        request.image_ref,
        viewer=Viewer(project_id=actor.project_id, is_admin=request.admin),
    )
    if request.metadata is not None:
        edits.check_metadata_items(
            quotas.metadata_items_limit(
                session, project_id=actor.project_id, user_id=actor.user_id
            ),
            request.metadata,
        )
    personality.check_limits(
        session,
        request.files,
        project_id=actor.project_id,
        user_id=actor.user_id,
        quota=request.quota,
    )
    own = (
        live_keys.own_entries(session, user_id=actor.user_id, requests=request.key_names)
        if request.key_names is not None
        else None
    )
    return image, own


def _rebuild_payload(request: RebuildRequest, *, image_uuid: str) -> dict[str, Any]:
    """A rebuild operation's payload: what it applies when it succeeds, the new config
    drive's secrets (dropped when the operation ends), and who asked."""
    apply: dict[str, Any] = {"image_ref": image_uuid}
    if request.name is not None:
        apply["display_name"] = request.name
    if request.hostname is not None:
        apply["hostname"] = request.hostname
    if request.description is not UNSET:
        apply["display_description"] = request.description
    if request.access_ip_v4 is not None:
        apply["access_ip_v4"] = request.access_ip_v4
    if request.access_ip_v6 is not None:
        apply["access_ip_v6"] = request.access_ip_v6
    payload: dict[str, Any] = {"apply": apply, "actor": _actor(request.actor)}
    if request.user_data is not UNSET:
        payload["user_data"] = [request.user_data]
    if request.metadata is not None:
        payload["metadata"] = request.metadata
    if request.admin_password is not None:
        payload["admin_password"] = request.admin_password
    if request.files:
        payload["files"] = [list(f) for f in request.files]
    return payload


def _notice(seconds: int, instance: Instance) -> int:
    """The notice an operation of ``instance`` gets (2.111): ``seconds`` for a running guest,
    none otherwise (``notices.applies``). Read before the task claim changes nothing it reads."""
    applies = notices.applies(seconds, vm_state=instance.vm_state, host=instance.host)
    return seconds if applies else 0


def _actor(actor: Actor) -> dict[str, str]:
    return {
        "user_id": actor.user_id,
        "project_id": actor.project_id,
        "request_id": actor.request_id,
    }


__all__ = ["Servers"]
