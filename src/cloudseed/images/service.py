"""Image registry operations (API database)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from cloudseed.compute.interfaces import BootImage
from cloudseed.errors import InvalidInput
from cloudseed.images.errors import (
    GIB,
    FlavorDiskSmallerThanImage,
    FlavorDiskSmallerThanMinDisk,
    FlavorMemoryTooSmall,
    ImageNotFound,
)
from cloudseed.images.models import DISK_FORMATS, Image
from cloudseed.programs import qemu_img

QCOW2_MAGIC = b"QFI\xfb"


@dataclass(frozen=True)
class Inspected:
    size: int
    virtual_size: int
    checksum_sha256: str


def inspect_file(path: Path, disk_format: str) -> Inspected:
    """Sizes and SHA-256 of an image file, refusing one whose content is not the declared
    format (a qcow2 file declared raw would let a guest read host files through its backing
    file) and a qcow2 file that refers to another file (a backing or external data file)."""
    if disk_format not in DISK_FORMATS:
        raise InvalidInput(f"disk format must be one of {', '.join(DISK_FORMATS)}")
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
            digest = hashlib.sha256(head)
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise InvalidInput(f"cannot read image file {path}: {exc.strerror}") from exc
    is_qcow2 = head == QCOW2_MAGIC
    if disk_format == "qcow2" and not is_qcow2:
        raise InvalidInput(f"{path} is not a qcow2 image")
    if disk_format == "raw" and is_qcow2:
        raise InvalidInput(f"{path} is a qcow2 image, not raw")
    size = path.stat().st_size
    virtual_size = size
    if disk_format == "qcow2":
        info = qemu_img.info(path, "qcow2")
        if info.backing_file or info.data_file:
            raise InvalidInput(
                f"{path} refers to another file ({info.backing_file or info.data_file}); "
                "register a standalone image (qemu-img convert -O qcow2)"
            )
        virtual_size = info.virtual_size
    return Inspected(size=size, virtual_size=virtual_size, checksum_sha256=digest.hexdigest())


def add_image(
    session: Session,
    *,
    name: str,
    path: Path,
    disk_format: str,
    properties: dict[str, str] | None = None,
    min_disk: int = 0,
    min_ram: int = 0,
) -> Image:
    inspected = inspect_file(path, disk_format)
    image = Image(
        uuid=str(uuid.uuid4()),
        name=name,
        disk_format=disk_format,
        path=str(path.resolve()),
        size=inspected.size,
        virtual_size=inspected.virtual_size,
        checksum_sha256=inspected.checksum_sha256,
        min_disk=min_disk,
        min_ram=min_ram,
        properties=json.dumps(properties or {}, sort_keys=True),
    )
    session.add(image)
    session.flush()
    return image


def add_bootable(
    session: Session,
    *,
    name: str,
    path: Path,
    disk_format: str,
    properties: dict[str, str] | None = None,
    kernel: Path | None = None,
    ramdisk: Path | None = None,
) -> Image:
    """Register an image and, when given, the kernel and initramfs it boots with: each is a
    raw image of its own ("NAME-kernel", "NAME-ramdisk") that the disk image names in its
    ``kernel_id`` and ``ramdisk_id`` properties, as Glance links them."""
    props = dict(properties or {})
    for role, file, prop in (("kernel", kernel, "kernel_id"), ("ramdisk", ramdisk, "ramdisk_id")):
        if file is None:
            continue
        if prop in props:
            raise InvalidInput(f"give either --{role} or the {prop} property, not both")
        props[prop] = add_image(session, name=f"{name}-{role}", path=file, disk_format="raw").uuid
    return add_image(session, name=name, path=path, disk_format=disk_format, properties=props)


def check_flavor_fits(image: Image, *, root_gb: int, memory_mb: int) -> None:
    """Refuse a flavor that cannot boot ``image``, as Nova's API does (400). A flavor disk of 0
    means "as big as the image" and fits any. Unlike Nova, which compares the image's file
    size here and finds a too-big virtual size only on the compute host (the instance then goes
    to ERROR), the virtual size is compared: the request fails at once with the reason."""
    if image.min_ram and memory_mb < image.min_ram:
        raise FlavorMemoryTooSmall()
    if not root_gb:
        return
    if image.min_disk and root_gb < image.min_disk:
        raise FlavorDiskSmallerThanMinDisk(flavor_gb=root_gb, min_disk_gb=image.min_disk)
    needed = image.virtual_size or image.size
    if needed > root_gb * GIB:
        raise FlavorDiskSmallerThanImage(flavor_gb=root_gb, image_size=needed)


def get_image(session: Session, image_ref: str) -> Image:
    image = session.scalar(
        select(Image)
        .where(or_(Image.uuid == image_ref, Image.name == image_ref))
        .order_by(Image.uuid != image_ref)
        .limit(1)
    )
    if image is None:
        raise ImageNotFound(image_ref)
    return image


def list_images(session: Session) -> list[Image]:
    return list(session.scalars(select(Image).order_by(Image.name, Image.uuid)))


def properties_of(image: Image) -> dict[str, str]:
    value: dict[str, str] = json.loads(image.properties)
    return value


def boot_image(session: Session, image_ref: str) -> BootImage | None:
    """The files a hypervisor boots ``image_ref`` from; None when it is not registered.

    As in Glance, the properties ``kernel_id`` and ``ramdisk_id`` name other registered images
    (the kernel and initramfs for a direct kernel boot) and ``os_command_line`` the kernel's
    command line, ``hw_cdrom_bus`` the CD-ROM bus.
    """
    try:
        image = get_image(session, image_ref)
    except ImageNotFound:
        return None
    props = properties_of(image)
    kernel = props.get("kernel_id")
    ramdisk = props.get("ramdisk_id")
    return BootImage(
        path=image.path,
        disk_format=image.disk_format,
        kernel_path=get_image(session, kernel).path if kernel else None,
        ramdisk_path=get_image(session, ramdisk).path if ramdisk else None,
        cmdline=props.get("os_command_line") or None,
        cdrom_bus=props.get("hw_cdrom_bus") or None,
    )
