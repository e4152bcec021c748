"""What an image file holds: its checksums, sizes, and whether its content is the declared
format, for both ways images arrive (a file the operator registers, data a project uploads).

A qcow2 file declared raw would let a guest read host files through its backing file, and a
qcow2 file that refers to another file (a backing or external data file) would reach outside
the store: both are refused. qcow2 headers are read by the one qemu-img wrapper.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from cloudseed.errors import InvalidInput
from cloudseed.images.errors import NotValidImage, VirtualSizeTooLarge
from cloudseed.images.formats import DISK_FORMATS
from cloudseed.programs import qemu_img
from cloudseed.programs.errors import ImageUnreadable

QCOW2_MAGIC = b"QFI\xfb"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Inspected:
    size: int
    virtual_size: int
    checksum_sha256: str
    checksum_md5: str


class Digest:
    """The size, checksums and first bytes of data seen in pieces. ``md5`` False skips the
    MD5 (a download checked against a recorded SHA-256 needs only that: hashing bounds how
    fast an image cache fills, docs/benchmarks.md)."""

    def __init__(self, *, md5: bool = True) -> None:
        self.size = 0
        self.head = b""
        self._sha256 = hashlib.sha256()
        # Glance's "checksum" is MD5: an identifier clients compare, not a security check.
        self._md5 = hashlib.md5(usedforsecurity=False) if md5 else None

    def update(self, data: bytes) -> None:
        if len(self.head) < len(QCOW2_MAGIC):
            self.head = (self.head + data)[: len(QCOW2_MAGIC)]
        self.size += len(data)
        self._sha256.update(data)
        if self._md5 is not None:
            self._md5.update(data)

    def fresh(self) -> Digest:
        """A new digest that computes what this one does."""
        return Digest(md5=self._md5 is not None)

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    @property
    def md5(self) -> str:
        if self._md5 is None:
            raise ValueError("this digest computes no MD5")
        return self._md5.hexdigest()


def check_format(
    path: Path,
    disk_format: str,
    *,
    head: bytes,
    size: int,
    shown: str,
    virtual_size_cap: int | None = None,
) -> int:
    """The virtual size of the image at ``path`` (its first bytes ``head``), or InvalidInput
    when its content is not ``disk_format``, refers to another file, or claims a virtual size
    over ``virtual_size_cap`` (VirtualSizeTooLarge; None: no bound). ``shown`` names the
    data in messages (the operator's file name; never the store's path to an API user).

    A header qemu-img refuses (an unknown version, an impossible cluster size or L1 table, a
    file cut short) is the data's fault: NotValidImage, a 400. What stays a 503 (the
    ProgramFailed that ``qemu_img.info`` raises otherwise) is the server's own trouble:
    prlimit or qemu-img not installed, qemu-img stopped by its resource limits or by the
    timeout, output that is not JSON."""
    if disk_format not in DISK_FORMATS:
        raise InvalidInput(f"disk format must be one of {', '.join(DISK_FORMATS)}")
    is_qcow2 = head == QCOW2_MAGIC
    if disk_format == "qcow2" and not is_qcow2:
        raise InvalidInput(f"{shown} is not a qcow2 image")
    if disk_format == "raw" and is_qcow2:
        raise InvalidInput(f"{shown} is a qcow2 image, not raw")
    if disk_format != "qcow2":
        return _within_cap(size, virtual_size_cap, shown=shown)
    try:
        info = qemu_img.info(path, "qcow2")
    except ImageUnreadable as exc:
        raise NotValidImage(shown=shown, disk_format="qcow2", reason=exc.reason) from exc
    if info.backing_file or info.data_file:
        raise InvalidInput(
            f"{shown} refers to another file ({info.backing_file or info.data_file}); "
            "register a standalone image (qemu-img convert -O qcow2)"
        )
    return _within_cap(info.virtual_size, virtual_size_cap, shown=shown)


def _within_cap(virtual_size: int, cap: int | None, *, shown: str) -> int:
    """``virtual_size``, unless it is over ``cap``: a sparse qcow2 of a few megabytes can claim
    an exabyte, which a server's disk would then grow to."""
    if cap is not None and virtual_size > cap:
        raise VirtualSizeTooLarge(shown=shown, virtual_size=virtual_size, cap=cap)
    return virtual_size


def inspect_file(path: Path, disk_format: str, *, virtual_size_cap: int | None) -> Inspected:
    """Sizes and checksums of the image file at ``path``, checked against ``disk_format`` and
    ``virtual_size_cap``."""
    if disk_format not in DISK_FORMATS:
        raise InvalidInput(f"disk format must be one of {', '.join(DISK_FORMATS)}")
    digest = Digest()
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
    except OSError as exc:
        raise InvalidInput(f"cannot read image file {path}: {exc.strerror}") from exc
    virtual_size = check_format(
        path,
        disk_format,
        head=digest.head,
        size=digest.size,
        shown=str(path),
        virtual_size_cap=virtual_size_cap,
    )
    return Inspected(
        size=digest.size,
        virtual_size=virtual_size,
        checksum_sha256=digest.sha256,
        checksum_md5=digest.md5,
    )
