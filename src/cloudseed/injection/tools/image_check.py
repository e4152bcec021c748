"""Is this image what it says it is, and safe to open? Asked before any handler touches it.

``qemu-img info`` (``cloudseed.programs.qemu_img``, hardened) must read it as the declared
format; a raw image must not carry another format's header (which a later probe could
believe); and it may not need files we did not choose: no external data file, and a backing
file only where the qemu driver made the overlay itself.
"""

from __future__ import annotations

from pathlib import Path

from cloudseed.injection import formats
from cloudseed.injection.errors import ImageFormatMismatch, UnsafeImage
from cloudseed.programs import qemu_img
from cloudseed.programs.errors import ImageUnreadable


def verify(
    path: Path, fmt: str, *, allow_backing_file: bool = False, timeout: float = 60.0
) -> qemu_img.ImageInfo:
    """The image's info, after checking it really is ``fmt`` and needs no other file we did
    not choose; raises ``ImageFormatMismatch`` or ``UnsafeImage``."""
    try:
        image = qemu_img.info(path, fmt, timeout=timeout)
    except ImageUnreadable as exc:
        raise ImageFormatMismatch(path=str(path), declared=fmt, detail=exc.stderr) from None
    if image.format != fmt:
        raise ImageFormatMismatch(
            path=str(path), declared=fmt, detail=f"qemu-img reads it as {image.format}"
        )
    if fmt == "raw":
        with path.open("rb") as fh:
            found = formats.detect(fh.read(formats.HEADER_BYTES))
        if found is not None:
            raise ImageFormatMismatch(
                path=str(path), declared=fmt, detail=f"its header is a {found} header"
            )
    if image.data_file:
        raise UnsafeImage(
            path=str(path), detail=f"it has an external data file ({image.data_file})"
        )
    if image.backing_file and not allow_backing_file:
        raise UnsafeImage(
            path=str(path), detail=f"it has a backing file ({image.backing_file}); flatten it first"
        )
    return image
