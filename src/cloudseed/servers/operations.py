"""Background operations: what happens after the API answered 202.

Each operation was claimed by the request (``records.claim_task``) and is then run here, in a
worker thread: call the driver, then record the outcome in one transaction. A driver failure
moves the instance to ERROR with the fault recorded and clears the task, so the record never
stays half-way; values the request applied (key pair, user data) stay consistent with each
other because they were written together when the task was claimed.

Config drives (``configdrive/``) are built here, before the driver is called: on create and
rebuild when the instance has one (with the admin password and personality files, which are
passed in memory and never stored), and on a HARD reboot that carries new user data. A drive
that cannot be built fails create and rebuild (ERROR, with the reason); a reboot whose drive
cannot be built is not done at all: the guest, its old drive and its old user data stay as
they were, and the failure is recorded in the action and the fault. The drive builder and the
vendordata build check are handed in (``api/app.py`` wires them): servers imports neither
configdrive nor vendordata, only the ``ConfigDrives`` protocol declared here.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlalchemy import update

from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import Driver, GuestSpec
from cloudseed.db.base import utcnow
from cloudseed.images.service import boot_image
from cloudseed.servers import action_log, records, states
from cloudseed.servers.errors import NotStarted
from cloudseed.servers.models import Instance

Files = tuple[tuple[str, bytes], ...]

log = logging.getLogger(__name__)


def guest_spec(record: records.ServerRecord, drive: tuple[str, str] | None = None) -> GuestSpec:
    """``drive``: (path, format) of the instance's config drive, when it has one."""
    i = record.instance
    return GuestSpec(
        uuid=i.uuid,
        name=i.display_name,
        hostname=i.hostname,
        image_ref=i.image_ref,
        flavor=record.flavor,
        key_data=i.key_data,
        user_data=i.user_data,
        config_drive=bool(i.config_drive),
        ports=[
            {
                "mac_address": p.mac_address,
                "network_id": p.network_id,
                "mtu": p.mtu,
                "fixed_ips": [ip.address for ip in ips],
            }
            for p, ips in record.ports
        ],
        config_drive_path=drive[0] if drive else None,
        config_drive_format=drive[1] if drive else "iso9660",
        project_id=i.project_id or "",
        metadata=dict(record.metadata),
    )


class BuiltDrive(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def format(self) -> str: ...


class ConfigDrives(Protocol):
    """What operations ask of config drives (``configdrive.service.DriveBuilder``)."""

    def build(
        self,
        uuid: str,
        *,
        admin_pass: str | None = ...,
        files: Files = ...,
        user_data: str | None = ...,
        carry_over: bool = ...,
    ) -> BuiltDrive:
        """Build and put in place the drive of ``uuid``. ``user_data`` (when given) stands in
        for the instance's; ``carry_over`` keeps the admin password and files of its current
        drive."""
        ...

    def existing(self, uuid: str) -> tuple[str, str] | None:
        """(path, format) of the instance's drive, or None."""
        ...

    def remove(self, uuid: str) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """Instance columns to set when the driver call succeeded."""

    vm_state: str
    power_state: int
    launched: bool = False


class Operations:
    def __init__(
        self,
        *,
        cells: CellDatabases,
        driver: Driver,
        max_workers: int = 8,
        build_check: Callable[[str], None] | None = None,
        drives: ConfigDrives | None = None,
    ) -> None:
        self.cells = cells
        self.driver = driver
        # Run before the driver on create and rebuild; raising fails the build. A config
        # drive build asks vendordata itself (once), so the check is skipped then.
        self.build_check = build_check
        self.drives = drives
        self._executor = ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="cloudseed-op"
        )
        self._pending: set[Future[None]] = set()

    def shutdown(self) -> None:
        """Let running and queued operations finish, so no instance is left in a task with
        nothing working on it (they live only in this process until operations are durable).
        ``[api] max_count_per_request`` bounds how much one request can queue, and so how long
        a stop waits."""
        self._executor.shutdown(wait=True)

    def idle(self) -> bool:
        return not any(not f.done() for f in self._pending)

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        future = self._executor.submit(fn, *args)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def _prepare(self, guest: GuestSpec, *, admin_password: str | None, files: Files) -> GuestSpec:
        """Before spawn or rebuild: the password and files, and a fresh config drive."""
        guest = replace(guest, admin_password=admin_password, files=files)
        if guest.config_drive and self.drives is not None:
            built = self.drives.build(guest.uuid, admin_pass=admin_password, files=files)
            return replace(guest, config_drive_path=built.path, config_drive_format=built.format)
        if self.build_check is not None:
            self.build_check(guest.uuid)
        return guest

    def build(
        self, uuid: str, action_id: int, *, admin_password: str | None = None, files: Files = ()
    ) -> None:
        def call(guest: GuestSpec) -> None:
            self.driver.spawn(self._prepare(guest, admin_password=admin_password, files=files))

        self._submit(
            self._run,
            uuid,
            action_id,
            "compute__do_build_and_run_instance",
            call,
            Outcome(states.ACTIVE, states.RUNNING, launched=True),
        )

    def reboot(
        self,
        uuid: str,
        action_id: int,
        *,
        hard: bool,
        pending_user_data: tuple[str | None] | None = None,
    ) -> None:
        """``pending_user_data``: user data that becomes the instance's only if the reboot
        succeeds (``(None,)`` clears it). With a config drive, the drive is rebuilt with it
        first, keeping the admin password and files of the drive it replaces."""

        def call(guest: GuestSpec) -> None:
            if pending_user_data is not None:
                guest = replace(guest, user_data=pending_user_data[0])
                if hard and guest.config_drive and self.drives is not None:
                    try:
                        built = self.drives.build(
                            uuid, user_data=pending_user_data[0], carry_over=True
                        )
                    except Exception as exc:
                        raise NotStarted(exc) from exc
                    guest = replace(
                        guest, config_drive_path=built.path, config_drive_format=built.format
                    )
            self.driver.reboot(guest, hard=hard)

        self._submit(
            self._run,
            uuid,
            action_id,
            "compute_reboot_instance",
            call,
            Outcome(states.ACTIVE, states.RUNNING),
            pending_user_data,
        )

    def rebuild(
        self,
        uuid: str,
        action_id: int,
        *,
        final_vm_state: str,
        admin_password: str | None = None,
        files: Files = (),
    ) -> None:
        power = states.RUNNING if final_vm_state == states.ACTIVE else states.SHUTDOWN

        def call(guest: GuestSpec) -> None:
            guest = self._prepare(guest, admin_password=admin_password, files=files)
            self.driver.rebuild(guest)
            if final_vm_state == states.STOPPED:
                self.driver.power_off(guest.uuid)

        self._submit(
            self._run,
            uuid,
            action_id,
            "compute_rebuild_instance",
            call,
            Outcome(final_vm_state, power, launched=True),
        )

    def stop(self, uuid: str, action_id: int) -> None:
        self._submit(
            self._run,
            uuid,
            action_id,
            "compute_stop_instance",
            lambda g: self.driver.power_off(g.uuid),
            Outcome(states.STOPPED, states.SHUTDOWN),
        )

    def start(self, uuid: str, action_id: int) -> None:
        self._submit(
            self._run,
            uuid,
            action_id,
            "compute_start_instance",
            lambda g: self.driver.power_on(g),
            Outcome(states.ACTIVE, states.RUNNING),
        )

    def destroy(self, uuid: str) -> None:
        def call() -> None:
            try:
                self.driver.destroy(uuid)
            except Exception:
                log.exception("destroying the guest of deleted instance %s failed", uuid)
            if self.drives is not None:
                try:
                    self.drives.remove(uuid)
                except OSError:
                    log.exception("removing the config drive of deleted instance %s failed", uuid)

        self._submit(call)

    def _run(
        self,
        uuid: str,
        action_id: int,
        event: str,
        call: Callable[[GuestSpec], None],
        outcome: Outcome,
        pending_user_data: tuple[str | None] | None = None,
    ) -> None:
        try:
            db = self.cells.for_instance(uuid)
            with db.read() as session:
                record = records.load(session, uuid)
            drive = (
                self.drives.existing(uuid)
                if self.drives is not None and record.instance.config_drive
                else None
            )
            guest = guest_spec(record, drive)
            with self.cells.api_db.read() as api_session:  # images are registered there
                guest = replace(guest, image=boot_image(api_session, guest.image_ref))
            call(guest)
        except NotStarted as exc:
            self._not_started(uuid, action_id, event, exc.cause)
            return
        except Exception as exc:  # the driver's failure, or the instance vanished
            self._fail(uuid, action_id, event, exc)
            return
        now = utcnow()
        values: dict[str, Any] = {
            "vm_state": outcome.vm_state,
            "task_state": None,
            "power_state": outcome.power_state,
            "updated_at": now,
        }
        if outcome.launched:
            values["launched_at"] = now
        with db.write() as session:
            if pending_user_data is not None:
                values["user_data"] = pending_user_data[0]
            session.execute(
                update(Instance)
                .where(Instance.uuid == uuid, Instance.deleted == 0)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if pending_user_data is not None:
                records.guest_changed(session, uuid)
            records.set_extra(session, uuid, fault=None)
            action_log.finish(session, action_id=action_id, event=event)

    def _fail(self, uuid: str, action_id: int, event: str, exc: Exception) -> None:
        self._record_failure(uuid, action_id, event, exc, {"vm_state": states.ERROR})

    def _not_started(self, uuid: str, action_id: int, event: str, exc: Exception) -> None:
        self._record_failure(uuid, action_id, event, exc, {})

    def _record_failure(
        self, uuid: str, action_id: int, event: str, exc: Exception, values: dict[str, Any]
    ) -> None:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        log.warning("operation %s on %s failed: %s", event, uuid, message)
        try:
            db = self.cells.for_instance(uuid)
            with db.write() as session:
                session.execute(
                    update(Instance)
                    .where(Instance.uuid == uuid, Instance.deleted == 0)
                    .values(task_state=None, updated_at=utcnow(), **values)
                    .execution_options(synchronize_session=False)
                )
                records.set_extra(
                    session,
                    uuid,
                    fault={
                        "code": 500,
                        "message": message,
                        "created": utcnow().isoformat(),
                        "details": "".join(traceback.format_exception(exc))[-4000:],
                    },
                )
                action_log.finish(session, action_id=action_id, event=event, error=message)
        except Exception:
            log.exception("recording the failure of %s on %s failed", event, uuid)
