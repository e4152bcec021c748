"""The agent's reconcile at start: what the driver has against what the database says, once.

For each settled instance of this host (launched, no task):

- its guest is missing (the driver does not have it): power state NOSTATE, logged, as Nova's
  sync does ("unexpectedly not found");
- its guest is switched off while the instance is ACTIVE (the qemu driver's guests never
  outlive the service that ran them): with ``[DEFAULT] resume_guests_state_on_host_boot`` a
  start is queued, with the instance action ``start`` by this agent; without, it is recorded
  SHUTOFF with an action ``stop`` (``servers/lifecycle/power_sync.py``).

A guest of no live instance (deleted, or unknown) is destroyed. Guests of live instances of
other hosts are left alone (agents of several hosts may share a machine and its state_path).
Then the driver cleans up what no guest needs any more (``Driver.clean_up``: the qemu driver's
bridged networks left by a deleted network or a crashed agent).
"""

from __future__ import annotations

import logging
import uuid as uuidlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.compute.interfaces import Driver
from cloudseed.servers.history.bootstrap import Actor
from cloudseed.servers.lifecycle import power_sync
from cloudseed.servers.models import Instance
from cloudseed.servers.states import ACTIVE, NOSTATE

log = logging.getLogger(__name__)


def reconcile_host(
    cells: CellDatabases, driver: Driver, *, host: str, owner: str, resume: bool
) -> None:
    """Reconcile ``host``'s guests and instances, as agent ``owner`` (its run's name);
    ``resume``: ``resume_guests_state_on_host_boot``."""
    try:
        have = driver.running()
    except Exception:
        log.exception("compute agent %s: cannot list the driver's guests", owner)
        return
    known: set[str] = set()
    for cell in cells.all_cells():
        # The notes are logged once the transaction committed: it may run more than once.
        cell_known, notes = cell.run(
            lambda session: _reconcile_cell(
                session, have, driver=driver, host=host, owner=owner, resume=resume
            ),
            write=True,
        )
        known.update(cell_known)
        for note in notes:
            log.warning("compute agent %s: %s", owner, note)
    for orphan in sorted(have - known):
        log.warning("compute agent %s: destroying orphan guest %s", owner, orphan)
        try:
            driver.destroy(orphan)
        except Exception:
            log.exception("compute agent %s: destroying %s failed", owner, orphan)
    try:
        driver.clean_up()
    except Exception:
        log.exception("compute agent %s: the driver's clean-up failed", owner)


def _reconcile_cell(
    session: Session, have: set[str], *, driver: Driver, host: str, owner: str, resume: bool
) -> tuple[set[str], list[str]]:
    """``reconcile_host`` in one cell: its live instances' uuids, and what to log."""
    known = set(session.scalars(select(Instance.uuid).where(Instance.deleted == 0)))
    instances = session.scalars(
        select(Instance).where(Instance.host == host, Instance.deleted == 0)
    )
    notes = []
    for instance in list(instances):
        if instance.task_state is not None or instance.launched_at is None:
            continue  # not settled: its operation's lease decides
        if instance.uuid not in have:
            notes.append(f"the guest of instance {instance.uuid} is missing")
            instance.power_state = NOSTATE
        elif instance.vm_state == ACTIVE and not _powered_on(driver, instance.uuid, owner=owner):
            done = _switched_off(session, instance, host=host, owner=owner, resume=resume)
            if done is not None:
                notes.append(f"instance {instance.uuid}: {done}")
    return known, notes


def _powered_on(driver: Driver, uuid: str, *, owner: str) -> bool:
    try:
        return driver.powered_on(uuid)
    except Exception:  # cannot tell: leave the record as it is
        log.exception("compute agent %s: cannot tell whether %s runs", owner, uuid)
        return True


def _switched_off(
    session: Session, instance: Instance, *, host: str, owner: str, resume: bool
) -> str | None:
    """An ACTIVE instance whose guest is switched off: start it again, or record it; what
    was done, or None when another got there first."""
    actor = Actor(
        user_id=owner[:255],  # a column of 255: the host name may be long
        project_id=instance.project_id,
        request_id=f"req-{uuidlib.uuid4()}",
    )
    found = f"the guest was switched off when compute agent {owner} started"
    if resume:
        details = f"{found}; resume_guests_state_on_host_boot: starting it"
        queued = power_sync.queue_start(
            session, instance.uuid, host=host, actor=actor, details=details
        )
        done = queued is not None
    else:
        details = f"{found}; instance shutdown by itself: recorded as stopped"
        done = power_sync.record_shutdown(session, instance.uuid, actor=actor, details=details)
    return details if done else None
