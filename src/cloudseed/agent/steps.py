"""What each kind of operation does on the compute host.

``run`` reads the instance, calls the driver, then records the outcome (``outcomes.py``) in one
transaction that also ends the operation (``queue.finish``): the instance's new vm/task/power
state, the values the operation applies when it succeeds (a rebuild's key pair, user data,
name, hostname, metadata and image; a HARD reboot's user data), the history of those values,
and the instance action's event. The values a request changes are held in the operation's
payload until then, so a guest is never served values of an operation that has not happened.
A build's success is written together with the other builds ending meanwhile
(``build_outcomes.py``), and builds claimed together read their records at once
(``batch_reads.py``).

After each operation that leaves the guest running (or stopped), the driver's answer to
``ssh_forward`` is recorded as the instance's system metadata ``ssh_forward`` (removed when
there is none), so ``cloudseed server ssh`` on any node finds the way in; a destroy removes it.

A driver failure moves the instance to ERROR with the fault recorded (a reboot whose new
config drive cannot be built is not done at all: the instance stays as it was, and the action
records why). If the lease was lost meanwhile (another agent resumed the operation, or an admin
reset the instance), nothing is written.

A ``keys`` operation (live keys pushed through the guest agent) is ``keys.KeyPusher``'s; each
success above that leaves the guest running may queue one (``keys.after_operation``).

Every step can run again after its agent died half-way: the driver's spawn, rebuild and
destroy stand on what they find (``compute/interfaces.py``), config drives are replaced
atomically, and the outcome is recorded once, by whoever holds the lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from cloudseed.agent import noticed_delete
from cloudseed.agent.batch_reads import BatchRecords
from cloudseed.agent.build_outcomes import BuildOutcomes, batchable
from cloudseed.agent.guests import ConfigDrives, Files, guest_spec
from cloudseed.agent.images import AgentImages
from cloudseed.agent.key_operations import KeyPusher
from cloudseed.agent.outcomes import Lost, Outcome, record_failure, record_fault, record_success
from cloudseed.agent.seed_urls import SeedUrls
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import NOCLOUD_BOOTSTRAP, Driver, GuestSpec
from cloudseed.db.engines import Database
from cloudseed.servers import records, states
from cloudseed.servers.creation import personality
from cloudseed.servers.errors import NotStarted
from cloudseed.servers.history import actions as action_log
from cloudseed.servers.lifecycle import console_tails, queue
from cloudseed.servers.system_metadata import SSH_FORWARD

log = logging.getLogger(__name__)

# The kinds whose driver call reads the image's files (disk, kernel, initramfs): the agent
# makes sure they are in its image cache first. A stop only switches the guest off.
NEEDS_IMAGE = frozenset({"build", "rebuild", "reboot_soft", "reboot_hard", "start"})

# The instance event each kind records (Nova's names).
EVENTS = {
    "build": "compute__do_build_and_run_instance",
    "rebuild": "compute_rebuild_instance",
    "reboot_soft": "compute_reboot_instance",
    "reboot_hard": "compute_reboot_instance",
    "stop": "compute_stop_instance",
    "start": "compute_start_instance",
    "delete": "compute_terminate_instance",  # a noticed delete's (agent/noticed_delete.py)
}


@dataclass
class Steps:
    cells: CellDatabases
    driver: Driver
    owner: str
    drives: ConfigDrives | None = None
    build_check: Callable[[str], None] | None = None
    keys: KeyPusher | None = None
    images: AgentImages | None = None
    seeds: SeedUrls | None = None

    def __post_init__(self) -> None:
        # Build successes are written together (build_outcomes.py); one the batch cannot take
        # is written alone, as every other outcome.
        self.builds = BuildOutcomes(owner=self.owner, alone=self._record_build_alone)

    # -- entry -------------------------------------------------------------------------------

    def run(self, op: queue.Claimed, cell: Database, batch: BatchRecords | None = None) -> None:
        """Run ``op`` to its end (its outcome recorded), or stop quietly when the lease was
        lost. Never raises. ``batch``: where a build claimed with others finds its record."""
        try:
            if op.kind == "destroy":
                self._destroy(op, cell)
                return
            if op.kind == "delete":  # with a notice (2.111)
                noticed_delete.run(self.cells, op, cell, owner=self.owner)
                return
            if op.kind == "keys" and self.keys is not None:
                self.keys.run(op, cell)
                return
            self._operate(op, cell, batch)
        except Lost:
            log.info("operation %s (%s) was taken over or cancelled", op.uuid, op.kind)
        except Exception:
            log.exception("recording operation %s (%s) failed", op.uuid, op.kind)

    # -- kinds -------------------------------------------------------------------------------

    def _operate(self, op: queue.Claimed, cell: Database, batch: BatchRecords | None) -> None:
        p = op.payload
        event = EVENTS[op.kind]
        try:
            guest, record = self._guest(op, cell, batch)
            files = personality.decode(tuple((path, text) for path, text in p.get("files", ())))
            admin_password = p.get("admin_password")
            if op.kind == "build":
                self.driver.spawn(self._prepare(guest, record, admin_password, files))
                outcome = Outcome(states.ACTIVE, states.RUNNING, launched=True)
            elif op.kind == "rebuild":
                guest = self._prepare(guest, record, admin_password, files)
                self.driver.rebuild(guest)
                final = p.get("final_vm_state", states.ACTIVE)
                if final == states.STOPPED:
                    self.driver.power_off(guest.uuid)
                power = states.RUNNING if final == states.ACTIVE else states.SHUTDOWN
                outcome = Outcome(final, power, launched=True)
            elif op.kind in ("reboot_soft", "reboot_hard"):
                self.driver.reboot(self._reboot_guest(op, guest), hard=op.kind == "reboot_hard")
                outcome = Outcome(states.ACTIVE, states.RUNNING)
            elif op.kind == "stop":
                self.driver.power_off(guest.uuid)
                outcome = Outcome(states.STOPPED, states.SHUTDOWN)
            else:  # start
                self.driver.power_on(guest)
                outcome = Outcome(states.ACTIVE, states.RUNNING)
        except NotStarted as exc:
            record_failure(op, cell, event, exc.cause, {}, owner=self.owner)
            return
        except Lost:
            raise
        except Exception as exc:  # the driver's failure, or the instance vanished
            record_failure(op, cell, event, exc, {"vm_state": states.ERROR}, owner=self.owner)
            return
        outcome = replace(outcome, ssh_forward=self._ssh_forward(op.instance_uuid))
        if batchable(op):
            self.builds.record(op, cell, outcome.ssh_forward)
        else:
            record_success(op, cell, event, outcome, cells=self.cells, owner=self.owner)

    def _record_build_alone(self, op: queue.Claimed, cell: Database, outcome: Outcome) -> None:
        record_success(op, cell, EVENTS["build"], outcome, cells=self.cells, owner=self.owner)

    def _ssh_forward(self, uuid: str) -> str | None:
        """The driver's answer; a failure to tell is not the operation's failure."""
        try:
            return self.driver.ssh_forward(uuid)
        except Exception:
            log.exception("could not ask the driver for the SSH forward of %s", uuid)
            return None

    def _guest(
        self, op: queue.Claimed, cell: Database, batch: BatchRecords | None = None
    ) -> tuple[GuestSpec, records.ServerRecord]:
        """The guest as the operation will leave it (a rebuild's pending values shown), and
        the record it was made from."""
        if batch is not None and op.kind == "build":
            record = batch.get(op.instance_uuid)
        else:
            with cell.read() as session:
                record = records.load(session, op.instance_uuid)
        if op.kind == "rebuild":
            records.overlay(record, op.payload)
        drive = (
            self.drives.existing(op.instance_uuid)
            if self.drives is not None and record.instance.config_drive
            else None
        )
        guest = guest_spec(record, drive)
        if op.kind not in NEEDS_IMAGE or self.images is None:
            return guest, record
        # Fetched into this host's image cache when missing (images/cache.py): a failure is
        # the operation's (ERROR with the reason), as a driver's is.
        image = self.images.boot_image(guest.uuid, guest.image_ref)
        guest = replace(guest, image=image)
        if image is not None and image.bootstrap == NOCLOUD_BOOTSTRAP and self.seeds is not None:
            # A guest that reads only NoCloud boots from its seed URL: no config drive.
            url = self.seeds.for_boot(cell, guest.uuid)
            guest = replace(guest, config_drive=False, config_drive_path=None, nocloud_seed_url=url)
        return guest, record

    def _prepare(
        self,
        guest: GuestSpec,
        record: records.ServerRecord,
        admin_password: str | None,
        files: Files,
    ) -> GuestSpec:
        """Before spawn or rebuild: the password and files, and a fresh config drive."""
        guest = replace(guest, admin_password=admin_password, files=files)
        if guest.config_drive and self.drives is not None:
            built = self.drives.build(
                guest.uuid, admin_pass=admin_password, files=files, record=record
            )
            return replace(guest, config_drive_path=built.path, config_drive_format=built.format)
        if self.build_check is not None:
            self.build_check(guest.uuid)
        return guest

    def _reboot_guest(self, op: queue.Claimed, guest: GuestSpec) -> GuestSpec:
        """A HARD reboot that carries user data: the guest gets it (and, with a config
        drive, a drive rebuilt with it, keeping the password and files of the old one)."""
        pending = op.payload.get("user_data")
        if pending is None:
            return guest
        user_data = pending[0]
        guest = replace(guest, user_data=user_data)
        if op.kind == "reboot_hard" and guest.config_drive and self.drives is not None:
            try:
                built = self.drives.build(guest.uuid, user_data=user_data, carry_over=True)
            except Exception as exc:
                raise NotStarted(exc) from exc
            guest = replace(guest, config_drive_path=built.path, config_drive_format=built.format)
        return guest

    def _destroy(self, op: queue.Claimed, cell: Database) -> None:
        try:
            self.driver.destroy(op.instance_uuid)
        except Exception as exc:
            log.exception("destroying the guest of deleted instance %s failed", op.instance_uuid)
            error: str | None = f"{type(exc).__name__}: {exc}"
        else:
            error = None
        if self.drives is not None:
            try:
                self.drives.remove(op.instance_uuid)
            except OSError:
                log.exception("removing the drive of deleted instance %s failed", op.instance_uuid)
        if self.images is not None and error is None:
            self.images.forget(op.instance_uuid)  # its images may be evicted now

        def record_destroyed(session: Session) -> None:
            state = queue.FAILED if error else queue.DONE
            if not queue.finish(session, op.id, owner=self.owner, state=state, error=error):
                raise Lost()
            records.set_system_metadata(session, op.instance_uuid, SSH_FORWARD, None)
            console_tails.remove(session, op.instance_uuid)

        cell.run(record_destroyed, write=True)

    def give_up(self, op: queue.Claimed, cell: Database, reason: str) -> None:
        """End an operation that was interrupted too often: ERROR with the reason."""
        if op.kind == "keys" and self.keys is not None:
            self.keys.give_up(op, cell, reason)  # a failed delivery, not an instance fault
            return
        event = EVENTS.get(op.kind)

        def record_given_up(session: Session) -> None:
            if not queue.finish(session, op.id, owner=self.owner, state=queue.FAILED, error=reason):
                return
            if event is None:  # a destroy: the instance is already deleted
                return
            record_fault(session, op.instance_uuid, reason, reason, {"vm_state": states.ERROR})
            if op.action_id is not None:
                action_log.finish(session, action_id=op.action_id, event=event, error=reason)

        cell.run(record_given_up, write=True)
