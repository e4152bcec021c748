"""cloudseed's own copies of registered image files, under ``<state_path>/images/``.

Instances are made from these copies, never from the file the operator named: moving, editing
or deleting that file afterwards changes nothing for existing or new instances (a qcow2
overlay whose backing file changes underneath is silently corrupt). ``cp --reflink=auto
--sparse=always`` shares the blocks where the filesystem can (btrfs, XFS: instant, no extra
space) and otherwise writes a sparse copy. The copy goes to a temporary name in the same
directory, is fsynced and renamed into place, so a crash never leaves a half-written image
under a registered name; the caller checks and hashes the copy, not the original, so what is
recorded is what instances boot.

Uploaded data (the Glance slice's ``PUT /v2/images/{id}/file``) arrives in pieces through a
``Receiver``: written to a partial file in the same directory, counted and hashed as it comes,
refused past the size cap, and put in place the same way (fsync, rename) only when complete.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from cloudseed.errors import InvalidInput
from cloudseed.images.contents import Digest
from cloudseed.images.errors import ImageLimitExceeded
from cloudseed.programs.errors import ProgramFailed
from cloudseed.programs.run import run

# An image copy can be many GiB on a filesystem without reflinks.
COPY_TIMEOUT = 3600.0


def images_dir(state_dir: Path) -> Path:
    return state_dir / "images"


def copy_in(source: Path, directory: Path, *, suffix: str) -> Path:
    """Copy ``source`` into ``directory`` under a new unique name ending in ``suffix`` and
    return the copy's path."""
    if not source.is_file():
        raise InvalidInput(f"cannot read image file {source}: not a regular file")
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{uuid.uuid4()}{suffix}"
    partial = directory / f".{name}.partial"
    try:
        run(
            ["cp", "--reflink=auto", "--sparse=always", "--", str(source), str(partial)],
            timeout=COPY_TIMEOUT,
        )
        fd = os.open(partial, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        final = directory / name
        os.replace(partial, final)
        _fsync_dir(directory)
    except ProgramFailed as exc:
        partial.unlink(missing_ok=True)
        raise InvalidInput(f"cannot copy image file {source}: {exc.detail}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return final


def discard(path: Path) -> None:
    """Remove a copy whose registration did not happen, or the data of a deleted image."""
    path.unlink(missing_ok=True)


class Receiver:
    """One upload on its way into the store. ``write`` each piece, then ``finish`` (the final
    path) or ``discard``; ``digest`` has the size and checksums of what was written."""

    def __init__(self, directory: Path, *, suffix: str, limit: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        # Resolved: the path is recorded, and must not depend on the working directory.
        directory = directory.resolve()
        self.directory = directory
        self.limit = limit
        self.digest = Digest()
        self.final = directory / f"{uuid.uuid4()}{suffix}"
        self.partial = directory / f".{self.final.name}.partial"
        self._file = self.partial.open("xb")

    def write(self, data: bytes) -> None:
        if self.digest.size + len(data) > self.limit:
            raise too_large()
        self.digest.update(data)
        self._file.write(data)

    def finish(self) -> Path:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.partial, self.final)
        _fsync_dir(self.directory)
        return self.final

    def discard(self) -> None:
        self._file.close()
        self.partial.unlink(missing_ok=True)
        self.final.unlink(missing_ok=True)


def too_large() -> ImageLimitExceeded:
    """Glance's 413 for data over ``image_size_cap``."""
    return ImageLimitExceeded("The incoming image is too large: The provided image is too large.")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
