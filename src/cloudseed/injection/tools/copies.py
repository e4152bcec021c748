"""A working copy of an image next to it, swapped in only when everything worked.

The copy lives in the same directory so the final ``rename`` is atomic (same filesystem) and a
qcow2 overlay's relative backing path still resolves. ``cp --sparse=always`` keeps a mostly
empty raw disk small, ``--reflink=auto`` makes the copy nearly free on btrfs and XFS, and mode
and owner are kept so the swapped-in file is what the hypervisor expects.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cloudseed.injection.errors import ImageToolFailed
from cloudseed.programs import run as program

# Copying is bounded by disk speed and image size, not by a hostile image: allow an hour.
COPY_TIMEOUT = 3600.0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def working_copy(image: Path, *, timeout: float = COPY_TIMEOUT) -> Iterator[Path]:
    """Yields a copy of ``image``; a clean exit renames it over ``image``, an exception
    deletes it and leaves ``image`` exactly as it was."""
    try:
        fd, name = tempfile.mkstemp(dir=image.parent, prefix=f".{image.name}.", suffix=".inject")
    except OSError as exc:
        raise ImageToolFailed(
            tool="working copy", detail=f"cannot create a file next to {image}: {exc.strerror}"
        ) from None
    os.close(fd)
    copy = Path(name)
    try:
        program.run(
            [
                "cp",
                "--reflink=auto",
                "--sparse=always",
                "--preserve=mode,ownership",
                str(image),
                str(copy),
            ],
            timeout=timeout,
        )
        yield copy
        with copy.open("rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(copy, image)
        _fsync_dir(image.parent)
    except BaseException:
        copy.unlink(missing_ok=True)
        raise
