"""The compute driver protocol: what turns an instance record into a running machine.

Drivers are called by the compute agent (``agent/steps.py``), one call per operation, in a
worker thread; they never touch the database. An operation whose agent died is run again by
the next agent of the host, so every call must cope with finding its work half or wholly done
(a guest that already runs, a disk already replaced, a guest already gone). A driver raises
``DriverError`` with a message for the operator; the operation then records the fault and moves
the instance to ERROR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cloudseed.flavors.snapshots import FlavorSnapshot

# The image property ``cloudseed_bootstrap``'s value for guests that read only cloud-init's
# NoCloud datasource (``BootImage.bootstrap``).
NOCLOUD_BOOTSTRAP = "nocloud"


@dataclass(frozen=True)
class BootImage:
    """The image's files on this host, resolved from the image registry by the caller.

    ``kernel_path`` and ``ramdisk_path`` come from the image properties ``kernel_id`` and
    ``ramdisk_id`` (other registered images, as in Glance), ``cmdline`` from
    ``os_command_line``; an image without a kernel boots from its own bootloader.
    ``cdrom_bus`` is Nova's ``hw_cdrom_bus`` property: the bus of CD-ROMs such as an ISO 9660
    config drive (None: the machine's default, SATA on q35). ``bootstrap`` is cloudseed's
    ``cloudseed_bootstrap`` property: ``nocloud`` for a guest that reads only cloud-init's
    NoCloud datasource, booted with its seed URL in the SMBIOS serial (docs/qemu-driver.md);
    None: the OpenStack metadata service and config drive, as Nova's guests.
    """

    path: str
    disk_format: str
    kernel_path: str | None = None
    ramdisk_path: str | None = None
    cmdline: str | None = None
    cdrom_bus: str | None = None
    bootstrap: str | None = None


@dataclass(frozen=True)
class GuestSpec:
    """Everything a driver needs to (re)create a guest, taken from the instance record."""

    uuid: str
    name: str
    hostname: str
    image_ref: str
    flavor: FlavorSnapshot | None  # None: an instance without a recorded flavor
    key_data: str | None
    user_data: str | None
    config_drive: bool
    ports: list[dict[str, object]] = field(default_factory=list)
    # The built drive to attach ("iso9660": a CD-ROM, "vfat": a disk); None without one.
    config_drive_path: str | None = None
    config_drive_format: str = "iso9660"
    # Known only while a create or rebuild runs; cloudseed never stores them. Not in repr:
    # a GuestSpec may end up in a log line or a traceback.
    admin_password: str | None = field(default=None, repr=False)
    files: tuple[tuple[str, bytes], ...] = ()
    # The owner, for the metadata proxy's X-Tenant-ID; the server metadata, for injection.
    project_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    # None when the image is not in the registry (drivers that need a file then refuse).
    image: BootImage | None = None
    # The server's NoCloud seed URL, for an image with ``cloudseed_bootstrap=nocloud``: made
    # (or renewed) by the agent at each start of the guest; None otherwise, or when the
    # server's seed is revoked.
    nocloud_seed_url: str | None = None


@dataclass(frozen=True)
class Capacity:
    """What a host offers to the scheduler (before allocation ratios and reservations)."""

    vcpus: int
    memory_mb: int
    disk_gb: int
    hypervisor_type: str
    hypervisor_hostname: str = ""


class Driver(Protocol):
    name: str

    def capacity(self) -> Capacity:
        """This host's resources, as the driver sees them."""
        ...

    def running(self) -> set[str]:
        """Uuids of the guests the driver has on this host (running or not)."""
        ...

    def powered_on(self, uuid: str) -> bool:
        """Whether the guest is running now: False when it is switched off (its service
        stopped or died, it powered itself off) or the driver does not have it. The agent
        compares this with the database when it starts (``Agent.reconcile``)."""
        ...

    def spawn(self, guest: GuestSpec) -> None: ...

    def reboot(self, guest: GuestSpec, *, hard: bool) -> None: ...

    def rebuild(self, guest: GuestSpec) -> None: ...

    def power_off(self, uuid: str) -> None: ...

    def power_on(self, guest: GuestSpec) -> None: ...

    def destroy(self, uuid: str) -> None: ...

    def ssh_forward(self, uuid: str) -> str | None:
        """``ADDR:PORT`` on the host that leads to the running guest's port 22, for a server
        that opted in (``compute/ssh_forward.py``); None when it has none (not opted in, not
        running, or the driver offers none). The agent records it after each operation."""
        ...

    def console_output(self, uuid: str) -> str:
        """The end of the guest's console log (whatever the driver keeps, at most ~100 KiB);
        "" when there is none."""
        ...

    def console_stamp(self, uuid: str) -> str:
        """A mark that changes whenever the guest's console output may have changed, cheap
        enough to ask of every guest every few seconds (the qemu driver: one ``stat``); ""
        when the guest has no console. The agent stores a console's tail in the database
        only when its mark changed (``agent/console_mirror.py``)."""
        ...

    def push_keys(
        self, instance_uuid: str, *, user: str, add: list[str], remove: list[str]
    ) -> None:
        """Through the running guest's agent: append ``add`` to ``user``'s authorized_keys
        (the lines already there stay), then drop ``remove``, and read the file back to
        confirm. Raises ``GuestAgentUnavailable`` (``compute/errors.py``) with the reason
        when that cannot be done: the guest is off, no agent answers in time, the agent
        refuses (no such user). Called in an operation's thread; may take a while."""
        ...

    def clean_up(self) -> None:
        """The agent starts (after ``reconcile``): remove what no guest of this host needs
        any more and an earlier agent may have left (the qemu driver: bridged networks'
        namespaces and processes)."""
        ...

    def close(self) -> None:
        """The service is stopping: leave no guest process running."""
        ...
