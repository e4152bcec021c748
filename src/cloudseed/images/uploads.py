"""An image's data arriving through the Glance slice (``PUT /v2/images/{id}/file``), as
Glance's status machine has it: ``queued`` -> ``saving`` while the data streams into the store
-> ``active`` with its size and checksums; back to ``queued`` when the upload fails, so it can
be tried again. Each step is one short transaction; the data is written between them, outside
any transaction. A second upload finds the image ``saving`` or ``active``: 409.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.images import visibility as access
from cloudseed.images.contents import Digest
from cloudseed.images.errors import (
    FormatsNotSet,
    ImageGoneDuringUpload,
    ImageStatusConflict,
    NoSuchImage,
)
from cloudseed.images.formats import ACTIVE, QUEUED, SAVING
from cloudseed.images.models import Image
from cloudseed.images.service import seen_by
from cloudseed.images.visibility import Viewer


@dataclass(frozen=True)
class Upload:
    """An image that is now ``saving``: what the data is checked against."""

    image_id: str
    disk_format: str


def begin_upload(session: Session, image_id: str, *, viewer: Viewer) -> Upload:
    image = session.scalar(select(Image).where(Image.uuid == image_id, seen_by(viewer)))
    if image is None:
        raise NoSuchImage(image_id)
    access.check_change(viewer, "upload_image", owner=image.owner)
    if image.status != QUEUED:
        raise ImageStatusConflict(current=image.status, wanted=SAVING)
    disk_format = image.disk_format
    if not disk_format or not image.container_format:
        raise FormatsNotSet(
            [name for name in ("disk_format", "container_format") if not getattr(image, name)]
        )
    # Conditional, so that of two uploads started together only one takes the image.
    taken = session.execute(
        update(Image).where(Image.id == image.id, Image.status == QUEUED).values(status=SAVING)
    )
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        raise ImageStatusConflict(current=SAVING, wanted=SAVING)
    return Upload(image_id=image_id, disk_format=disk_format)


def finish_upload(
    session: Session, upload: Upload, *, path: Path, digest: Digest, virtual_size: int
) -> None:
    """Record the data; ImageGoneDuringUpload when the image was deleted meanwhile (the caller
    then removes the file)."""
    done = session.execute(
        update(Image)
        .where(Image.uuid == upload.image_id, Image.status == SAVING)
        .values(
            status=ACTIVE,
            path=str(path),
            size=digest.size,
            virtual_size=virtual_size,
            checksum_sha256=digest.sha256,
            checksum_md5=digest.md5,
            updated_at=utcnow(),
        )
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]
        raise ImageGoneDuringUpload(upload.image_id)


def abort_upload(session: Session, upload: Upload) -> None:
    """Back to ``queued`` (Glance's restore), so the upload may be tried again."""
    session.execute(
        update(Image)
        .where(Image.uuid == upload.image_id, Image.status == SAVING)
        .values(status=QUEUED)
    )
