"""Image registry operations (API database): the operator's registration, a project's create
and delete, the look-ups (each as a viewer sees them: ``access.py``'s rules as SQL), and the
checks a server's image passes. Uploads are ``uploads.py``."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import ColumnElement, delete, or_, select, true
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.errors import InvalidInput
from cloudseed.images import visibility as access
from cloudseed.images.contents import inspect_file
from cloudseed.images.errors import (
    GIB,
    DuplicateImage,
    FlavorDiskSmallerThanImage,
    FlavorDiskSmallerThanMinDisk,
    FlavorMemoryTooSmall,
    ImageNotActive,
    ImageNotFound,
    NoSuchImage,
    ProtectedImage,
)
from cloudseed.images.formats import ACTIVE, QUEUED
from cloudseed.images.models import Image
from cloudseed.images.schemas import NewImage
from cloudseed.images.visibility import OPERATOR, SEEN_BY_ALL, Viewer


def add_image(
    session: Session,
    *,
    name: str,
    path: Path,
    disk_format: str,
    properties: dict[str, str] | None = None,
    min_disk: int = 0,
    min_ram: int = 0,
    virtual_size_cap: int | None = None,
) -> Image:
    """The operator's image: active at once, public, no owner. ``virtual_size_cap``: the
    largest virtual size accepted (``[glance] image_virtual_size_cap``; None: no bound)."""
    inspected = inspect_file(path, disk_format, virtual_size_cap=virtual_size_cap)
    image = Image(
        uuid=str(uuid.uuid4()),
        name=name,
        disk_format=disk_format,
        container_format="bare",
        path=str(path.resolve()),
        size=inspected.size,
        virtual_size=inspected.virtual_size,
        checksum_sha256=inspected.checksum_sha256,
        checksum_md5=inspected.checksum_md5,
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
    virtual_size_cap: int | None = None,
) -> Image:
    """Register an image and, when given, the kernel and initramfs it boots with: each is a
    raw image of its own ("NAME-kernel", "NAME-ramdisk") that the disk image names in its
    ``kernel_id`` and ``ramdisk_id`` properties, as Glance links them. ``virtual_size_cap``
    bounds the disk image's virtual size (as ``add_image``)."""
    props = dict(properties or {})
    for role, file, prop in (("kernel", kernel, "kernel_id"), ("ramdisk", ramdisk, "ramdisk_id")):
        if file is None:
            continue
        if prop in props:
            raise InvalidInput(f"give either --{role} or the {prop} property, not both")
        props[prop] = add_image(session, name=f"{name}-{role}", path=file, disk_format="raw").uuid
    return add_image(
        session,
        name=name,
        path=path,
        disk_format=disk_format,
        properties=props,
        virtual_size_cap=virtual_size_cap,
    )


def create_image(session: Session, new: NewImage, *, viewer: Viewer) -> Image:
    """A project's image record, queued until its data is uploaded (``uploads.py``)."""
    owner = new.owner or viewer.project_id
    access.check_create(viewer, owner=owner, visibility=new.visibility)
    image_id = new.image_id or str(uuid.uuid4())
    if session.scalar(select(Image.id).where(Image.uuid == image_id)) is not None:
        raise DuplicateImage(image_id)
    image = Image(
        uuid=image_id,
        name=new.name,
        disk_format=new.disk_format,
        container_format=new.container_format,
        min_disk=new.min_disk,
        min_ram=new.min_ram,
        properties=json.dumps(new.properties, sort_keys=True),
        status=QUEUED,
        owner=owner,
        visibility=new.visibility,
        protected=new.protected,
        os_hidden=new.os_hidden,
        tags=json.dumps(list(new.tags)),
    )
    session.add(image)
    try:
        session.flush()
    except IntegrityError as exc:  # the same id, created by a concurrent request
        raise DuplicateImage(image_id) from exc
    return image


def delete_image(session: Session, image_id: str, *, viewer: Viewer) -> str | None:
    """Delete the image record; the path of its data file (for the caller to remove once the
    transaction is committed and nothing boots from it), or None."""
    image = session.scalar(select(Image).where(Image.uuid == image_id, seen_by(viewer)))
    if image is None:
        raise NoSuchImage(image_id, f"Failed to find image {image_id} to delete")
    access.check_change(viewer, "delete_image", owner=image.owner)
    if image.protected:
        raise ProtectedImage(image_id)
    session.execute(delete(Image).where(Image.id == image.id))
    return image.path


def seen_by(viewer: Viewer) -> ColumnElement[bool]:
    """``access.can_see`` as a WHERE clause."""
    if viewer.is_admin:
        return true()
    return or_(Image.visibility.in_(SEEN_BY_ALL), Image.owner == viewer.project_id)


def listed_for(viewer: Viewer, visibility: str | None) -> ColumnElement[bool]:
    """Which images a list shows ``viewer`` (Glance's default list, or ``?visibility=``)."""
    if visibility in (None, "all"):
        if viewer.is_admin:
            return true()
        if visibility == "all":
            return seen_by(viewer)
        return or_(Image.visibility == "public", Image.owner == viewer.project_id)
    mine = true() if viewer.is_admin else Image.owner == viewer.project_id
    if visibility in SEEN_BY_ALL:
        return Image.visibility == visibility
    return (Image.visibility == visibility) & mine


def show_image(session: Session, image_id: str, *, viewer: Viewer) -> Image:
    """Glance's show: by id only, among the images ``viewer`` sees."""
    image = session.scalar(select(Image).where(Image.uuid == image_id, seen_by(viewer)))
    if image is None:
        raise NoSuchImage(image_id)
    return image


@dataclass(frozen=True)
class StoredData:
    """Where the store keeps an image's data on this API node, and what it is."""

    path: str
    size: int
    checksum_md5: str | None


def stored_data(session: Session, image_id: str, *, viewer: Viewer) -> StoredData | None:
    """The data of an image ``viewer`` sees (Glance's download, any who see the image may);
    None while it has none (queued, saving)."""
    image = show_image(session, image_id, viewer=viewer)
    if image.status != ACTIVE or image.path is None or image.size is None:
        return None
    return StoredData(path=image.path, size=image.size, checksum_md5=image.checksum_md5)


def get_image(session: Session, image_ref: str, *, viewer: Viewer = OPERATOR) -> Image:
    """An image by id or (cloudseed's convenience) name, among those ``viewer`` sees; an id
    wins over a name."""
    image = session.scalar(
        select(Image)
        .where(or_(Image.uuid == image_ref, Image.name == image_ref), seen_by(viewer))
        .order_by(Image.uuid != image_ref, Image.uuid)
        .limit(1)
    )
    if image is None:
        raise ImageNotFound(image_ref)
    return image


def bootable_image(session: Session, image_ref: str, *, viewer: Viewer) -> Image:
    """The image a server is created or rebuilt from: one ``viewer`` sees, with its data
    (Nova refuses an image that is not active, 400)."""
    image = get_image(session, image_ref, viewer=viewer)
    if image.status != ACTIVE:
        raise ImageNotActive(image.uuid)
    return image


def list_images(
    session: Session,
    *,
    viewer: Viewer = OPERATOR,
    visibility: str | None = None,
    newest_first: bool = False,
) -> list[Image]:
    """The images a list shows ``viewer``: by name, or newest first (Glance's order)."""
    order = (
        (Image.created_at.desc(), Image.uuid.desc()) if newest_first else (Image.name, Image.uuid)
    )
    return list(
        session.scalars(select(Image).where(listed_for(viewer, visibility)).order_by(*order))
    )


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
    needed = image.virtual_size or image.size or 0
    if needed > root_gb * GIB:
        raise FlavorDiskSmallerThanImage(flavor_gb=root_gb, image_size=needed)


def properties_of(image: Image) -> dict[str, str]:
    value: dict[str, str] = json.loads(image.properties)
    return value


def tags_of(image: Image) -> list[str]:
    value: list[str] = json.loads(image.tags or "[]")
    return value


@dataclass(frozen=True)
class ImageData:
    """An image's data as the registry describes it: what a compute agent downloads
    (``images/cache.py``) and checks what it got against."""

    image_id: str
    disk_format: str
    size: int
    checksum_sha256: str | None
    checksum_md5: str | None


@dataclass(frozen=True)
class BootSource:
    """The images a guest boots from: its disk, and the kernel and initramfs it may name.

    As in Glance, the properties ``kernel_id`` and ``ramdisk_id`` name other registered images
    (the kernel and initramfs for a direct kernel boot) and ``os_command_line`` the kernel's
    command line, ``hw_cdrom_bus`` the CD-ROM bus; cloudseed's own ``cloudseed_bootstrap``
    how the guest gets its data (``nocloud``: a NoCloud seed URL, docs/qemu-driver.md)."""

    disk: ImageData
    kernel: ImageData | None = None
    ramdisk: ImageData | None = None
    cmdline: str | None = None
    cdrom_bus: str | None = None
    bootstrap: str | None = None

    def all_data(self) -> list[ImageData]:
        return [d for d in (self.disk, self.kernel, self.ramdisk) if d is not None]


def boot_source(session: Session, image_ref: str) -> BootSource | None:
    """What a hypervisor boots ``image_ref`` from; None when it is not registered or has no
    data (then a driver that needs the data refuses). A project's image names only images its
    project sees: another project's private kernel is not found."""
    try:
        image = get_image(session, image_ref)
    except ImageNotFound:
        return None
    disk = _data_of(image)
    if disk is None:
        return None
    props = properties_of(image)
    owner = Viewer(project_id=image.owner) if image.owner is not None else OPERATOR
    return BootSource(
        disk=disk,
        kernel=_linked(session, props.get("kernel_id"), owner),
        ramdisk=_linked(session, props.get("ramdisk_id"), owner),
        cmdline=props.get("os_command_line") or None,
        cdrom_bus=props.get("hw_cdrom_bus") or None,
        bootstrap=props.get("cloudseed_bootstrap") or None,
    )


def _data_of(image: Image) -> ImageData | None:
    if image.status != ACTIVE or image.disk_format is None or image.size is None:
        return None
    return ImageData(
        image_id=image.uuid,
        disk_format=image.disk_format,
        size=image.size,
        checksum_sha256=image.checksum_sha256,
        checksum_md5=image.checksum_md5,
    )


def _linked(session: Session, image_ref: str | None, viewer: Viewer) -> ImageData | None:
    if not image_ref:
        return None
    image = get_image(session, image_ref, viewer=viewer)
    data = _data_of(image)
    if data is None:
        raise ImageNotActive(image.uuid)
    return data
