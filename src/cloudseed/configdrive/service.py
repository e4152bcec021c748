"""Building an instance's config drive, and reading drives back.

A drive lives at ``<state_path>/instances/<uuid>/disk.config`` (Nova's name). It is written
to a temporary file in the same directory, flushed to disk, then renamed over the old one, so
a guest (or a driver) sees either the old drive or the new one, never half of one, and a
failed build leaves the old drive as it was.

Vendordata is fetched once per build, through one ThreadedVendordata per builder (its answer
cache and service token shared by every build), and the same bytes go into every version
directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from cloudseed.cells.service import CellDatabases
from cloudseed.configdrive import contents, iso9660, vfat, vfat_reader
from cloudseed.configdrive.errors import DriveBuildFailed, UnknownDriveFormat, UnreadableDrive
from cloudseed.db.base import utcnow
from cloudseed.metadata import nocloud
from cloudseed.metadata.delivery import guest_facts
from cloudseed.metadata.facts import GuestFacts, vendordata_request
from cloudseed.servers import records
from cloudseed.settings import Settings
from cloudseed.vendordata import ThreadedVendordata

DRIVE_NAME = "disk.config"
# The label cloud-init's NoCloud datasource looks for (it matches CIDATA and cidata).
NOCLOUD_LABEL = "CIDATA"
FORMATS = ("iso9660", "vfat")
_KEEP: Any = object()  # "the instance's own user data", as opposed to None (none)


class Writer(Protocol):
    def __call__(self, tree: Mapping[str, bytes], out: BinaryIO, *, label: str = ...) -> Any: ...


WRITERS: dict[str, Writer] = {"iso9660": iso9660.write, "vfat": vfat.write}


def instance_dir(settings: Settings, uuid: str) -> Path:
    return settings.state_dir / "instances" / uuid


def drive_path(settings: Settings, uuid: str) -> Path:
    return instance_dir(settings, uuid) / DRIVE_NAME


def write_drive(
    tree: Mapping[str, bytes], path: Path, fmt: str, *, label: str | None = None
) -> None:
    """Write ``tree`` as an image at ``path``, replacing any file there atomically; labelled
    ``label``, or ``config-2``."""
    writer = WRITERS.get(fmt)
    if writer is None:
        raise UnknownDriveFormat(fmt)
    labelled = {} if label is None else {"label": label}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise DriveBuildFailed(path=str(path), reason=exc.strerror or str(exc)) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            writer(tree, out, **labelled)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o640)
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise DriveBuildFailed(path=str(path), reason=exc.strerror or str(exc)) from exc
        raise


def sniff_format(image: BinaryIO) -> str:
    """iso9660 or vfat, from the image's own headers (never from its name)."""
    image.seek(16 * 2048 + 1)
    if image.read(5) == b"CD001":
        return "iso9660"
    image.seek(510)
    if image.read(2) == b"\x55\xaa":
        return "vfat"
    raise UnreadableDrive("neither an ISO 9660 nor a FAT image")


def read_drive(path: Path) -> tuple[str, str, dict[str, bytes]]:
    """(format, volume label, path -> bytes) of the image at ``path``."""
    try:
        with path.open("rb") as image:
            fmt = sniff_format(image)
            module: Any = iso9660 if fmt == "iso9660" else vfat_reader
            return fmt, module.label(image), module.read(image)
    except OSError as exc:
        raise UnreadableDrive(f"cannot read {path}: {exc.strerror or exc}") from exc


def existing_drive(settings: Settings, uuid: str) -> tuple[str, str] | None:
    """(path, format) of the instance's drive, None when it has none."""
    path = drive_path(settings, uuid)
    try:
        with path.open("rb") as image:
            return str(path), sniff_format(image)
    except (OSError, UnreadableDrive):
        return None


def remove_drive(settings: Settings, uuid: str) -> None:
    """Delete the instance's drive, and its directory when nothing else is left in it."""
    directory = instance_dir(settings, uuid)
    if not directory.is_dir():
        return
    for leftover in directory.glob(f".{DRIVE_NAME}.*.tmp"):
        leftover.unlink(missing_ok=True)
    drive_path(settings, uuid).unlink(missing_ok=True)
    # A driver's own files may still be there; they are the driver's business.
    with contextlib.suppress(OSError):
        directory.rmdir()


@dataclass(frozen=True)
class BuiltDrive:
    path: str
    format: str
    admin_pass: str | None = field(repr=False)  # never shown
    files: tuple[tuple[str, bytes], ...]


class DriveBuilder:
    """Builds drives for instances of the cells; safe to call from many worker threads."""

    def __init__(self, settings: Settings, cells: CellDatabases) -> None:
        self.settings = settings
        self.cells = cells
        self.format = settings.default.config_drive_format
        self._skip = contents.skip_versions(settings.api.config_drive_skip_versions)
        self._vendordata: ThreadedVendordata | None = None
        self._lock = threading.Lock()

    def _vendordata_client(self) -> ThreadedVendordata:
        # Started on the first build: an API that never builds a drive runs no extra thread.
        with self._lock:
            if self._vendordata is None:
                self._vendordata = ThreadedVendordata(self.settings)
            return self._vendordata

    def close(self) -> None:
        with self._lock:
            if self._vendordata is not None:
                self._vendordata.close()
                self._vendordata = None

    def existing(self, uuid: str) -> tuple[str, str] | None:
        return existing_drive(self.settings, uuid)

    def remove(self, uuid: str) -> None:
        remove_drive(self.settings, uuid)

    def build(
        self,
        uuid: str,
        *,
        admin_pass: str | None = None,
        files: tuple[tuple[str, bytes], ...] = (),
        user_data: Any = _KEEP,
        carry_over: bool = False,
        output: Path | None = None,
        record: records.ServerRecord | None = None,
    ) -> BuiltDrive:
        """Build the drive of instance ``uuid`` and put it in place (or at ``output``).

        ``user_data`` (base64 text or None) stands in for the instance's, for a drive built
        before the new user data is committed. ``carry_over`` takes the admin password and
        files from the instance's current drive, the only place they are kept.
        ``record`` stands in for the stored one: a rebuild's drive shows the values the rebuild
        applies only once it has succeeded.

        Raises VendordataError (fatal vendordata), DriveBuildFailed or a NotFound.
        """
        if carry_over:
            carried = self.carried(drive_path(self.settings, uuid))
            admin_pass, files = carried.admin_pass, carried.files
        tree = self.tree_for(
            uuid, admin_pass=admin_pass, files=files, user_data=user_data, record=record
        )
        path = output or drive_path(self.settings, uuid)
        write_drive(tree, path, self.format)
        return BuiltDrive(path=str(path), format=self.format, admin_pass=admin_pass, files=files)

    def tree_for(
        self,
        uuid: str,
        *,
        admin_pass: str | None = None,
        files: tuple[tuple[str, bytes], ...] = (),
        user_data: Any = _KEEP,
        record: records.ServerRecord | None = None,
    ) -> dict[str, bytes]:
        """The files of instance ``uuid``'s drive (``build``'s arguments), not written
        anywhere: what the Ironic forms (``ironic.py``) are made of."""
        if record is None:
            with self.cells.for_instance(uuid).read() as session:
                record = records.load(session, uuid)
        # The keys current now: an expired one is never written to a drive.
        facts = guest_facts(record, utcnow())
        if user_data is not _KEEP:
            facts = dataclasses.replace(facts, user_data=user_data)
        return self.tree(facts, admin_pass=admin_pass, files=files)

    def carried_tree_for(self, uuid: str) -> dict[str, bytes]:
        """``tree_for`` with the admin password and files of the instance's drive on this
        host, as ``build(carry_over=True)`` writes them (none when this host has no drive)."""
        carried = self.carried(drive_path(self.settings, uuid))
        return self.tree_for(uuid, admin_pass=carried.admin_pass, files=carried.files)

    def build_nocloud(self, uuid: str, *, output: Path, fmt: str) -> BuiltDrive:
        """A ``CIDATA`` drive of instance ``uuid`` at ``output``: the four files of its
        NoCloud seed (``metadata/nocloud.py``, as the seed URL serves them), for guests that
        read cloud-init's NoCloud datasource from a disk."""
        with self.cells.for_instance(uuid).read() as session:
            record = records.load(session, uuid)
        facts = guest_facts(record, utcnow())
        vendordata = self._vendordata_client()
        files = nocloud.seed_files(
            facts,
            dhcp_domain=self.settings.api.dhcp_domain,
            vendor_data_json=vendordata.vendor_data_json(),
            vendor_data2_json=vendordata.vendor_data2_for_build(vendordata_request(facts)),
        )
        write_drive(files, output, fmt, label=NOCLOUD_LABEL)
        return BuiltDrive(path=str(output), format=fmt, admin_pass=None, files=())

    def tree(
        self, facts: GuestFacts, *, admin_pass: str | None, files: tuple[tuple[str, bytes], ...]
    ) -> dict[str, bytes]:
        vendordata = self._vendordata_client()
        data = contents.DriveData(
            dhcp_domain=self.settings.api.dhcp_domain,
            vendor_data_json=vendordata.vendor_data_json(),
            vendor_data2_json=vendordata.vendor_data2_for_build(vendordata_request(facts)),
            admin_pass=admin_pass,
            files=files,
            skip_versions=self._skip,
        )
        return contents.drive_tree(facts, data)

    @staticmethod
    def carried(path: Path) -> contents.Carried:
        """The admin password and files of the drive at ``path``; nothing when there is none.
        A drive that is there but unreadable fails the build rather than losing them."""
        if not path.exists():
            return contents.Carried(None, ())
        _fmt, _label, tree = read_drive(path)
        return contents.carried_over(tree)


def render_to_bytes(tree: Mapping[str, bytes], fmt: str) -> bytes:
    """The image as bytes (tests and the benchmark)."""
    writer = WRITERS.get(fmt)
    if writer is None:
        raise UnknownDriveFormat(fmt)
    buffer = io.BytesIO()
    writer(tree, buffer)
    return buffer.getvalue()
