"""The compute driver protocol: what turns an instance record into a running machine.

Drivers are called from background operations (``servers/operations.py``), one call per
operation, in a worker thread; they never touch the database. A driver raises ``DriverError``
with a message for the operator; the operation then records the fault and moves the instance to
ERROR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cloudseed.errors import CloudseedError


class DriverError(CloudseedError):
    """The hypervisor could not do what was asked; ``message`` says why."""


@dataclass(frozen=True)
class GuestSpec:
    """Everything a driver needs to (re)create a guest, taken from the instance record."""

    uuid: str
    name: str
    hostname: str
    image_ref: str
    flavor: dict[str, object]
    key_data: str | None
    user_data: str | None
    config_drive: bool
    ports: list[dict[str, object]] = field(default_factory=list)
    # The built drive to attach ("iso9660": a CD-ROM, "vfat": a disk); None without one.
    config_drive_path: str | None = None
    config_drive_format: str = "iso9660"
    # Known only while a create or rebuild runs; cloudseed never stores them.
    admin_password: str | None = None
    files: tuple[tuple[str, bytes], ...] = ()


class Driver(Protocol):
    name: str

    def spawn(self, guest: GuestSpec) -> None: ...

    def reboot(self, guest: GuestSpec, *, hard: bool) -> None: ...

    def rebuild(self, guest: GuestSpec) -> None: ...

    def power_off(self, uuid: str) -> None: ...

    def power_on(self, guest: GuestSpec) -> None: ...

    def destroy(self, uuid: str) -> None: ...
