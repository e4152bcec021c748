"""The seam between what injection writes and how a handler reaches the guest's files.

Each handler (libguestfs, debugfs, a mounted loop or nbd device) offers this small
``GuestFilesystem``; ``writer.py`` does everything else once, for all of them, and the unit tests
drive it with an in-memory filesystem. Paths are absolute guest paths. Handlers never follow a
symlink in the last component; ``writer.py`` checks every component before using a path, so an
intermediate symlink is refused before any handler resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Kind = Literal["file", "dir", "symlink", "other"]


@dataclass(frozen=True)
class GuestStat:
    kind: Kind
    mode: int  # permission bits only (0o7777)
    uid: int
    gid: int


class GuestFilesystem(Protocol):
    def lstat(self, path: str) -> GuestStat | None:
        """The entry itself (a symlink is reported, not followed); None when missing."""

    def readlink(self, path: str) -> str: ...

    def read(self, path: str) -> bytes: ...

    def write(self, path: str, data: bytes) -> None:
        """Create a file, or replace an existing file's content keeping its mode and owner."""

    def mkdir(self, path: str) -> None:
        """Create one directory; its parent exists."""

    def chmod(self, path: str, mode: int) -> None: ...

    def chown(self, path: str, uid: int, gid: int) -> None: ...


def kind_of_mode(st_mode: int) -> Kind:
    """The kind of a Unix ``st_mode`` (for handlers that read raw stat results)."""
    file_type = st_mode & 0o170000
    if file_type == 0o100000:
        return "file"
    if file_type == 0o040000:
        return "dir"
    if file_type == 0o120000:
        return "symlink"
    return "other"
