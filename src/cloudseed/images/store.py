"""cloudseed's own copies of registered image files, under ``<state_path>/images/``.

Instances are made from these copies, never from the file the operator named: moving, editing
or deleting that file afterwards changes nothing for existing or new instances (a qcow2
overlay whose backing file changes underneath is silently corrupt). ``cp --reflink=auto
--sparse=always`` shares the blocks where the filesystem can (btrfs, XFS: instant, no extra
space) and otherwise writes a sparse copy. The copy goes to a temporary name in the same
directory, is fsynced and renamed into place, so a crash never leaves a half-written image
under a registered name; the caller checks and hashes the copy, not the original, so what is
recorded is what instances boot.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from cloudseed.errors import InvalidInput
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
    """Remove a copy whose registration did not happen."""
    path.unlink(missing_ok=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
