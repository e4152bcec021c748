"""A guest filesystem mounted on the host (loop, nbd), reached without ever following a link.

The host kernel would happily follow a guest symlink like ``/root/.ssh -> /etc`` out of the
mount and into the host's own ``/etc``. So every path is walked one component at a time from a
descriptor of the mount root with ``O_NOFOLLOW`` (the ``*at`` calls through ``dir_fd``), and
files are changed through descriptors opened the same way: no string path is ever handed to the
kernel whole, and a symlink anywhere on the way is an error, not a detour.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cloudseed.injection.errors import GuestRefused
from cloudseed.injection.guest import GuestStat, kind_of_mode

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted by the guest must not hang us.
NODE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class LocalFilesystem:
    def __init__(self, root: Path) -> None:
        self.root = root

    @contextmanager
    def _parent(self, path: str) -> Iterator[tuple[int, str]]:
        """A descriptor of the directory holding ``path``'s last component, and that name."""
        parts = [p for p in path.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise GuestRefused(guest_path=path, detail="not a normal absolute path")
        fd = os.open(self.root, DIR_FLAGS)
        try:
            for depth, name in enumerate(parts[:-1], start=1):
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        prefix = "/" + "/".join(parts[:depth])
                        raise GuestRefused(
                            guest_path=path, detail=f"{prefix} is a symlink or not a directory"
                        ) from None
                    raise
                os.close(fd)
                fd = child
            yield fd, parts[-1]
        finally:
            os.close(fd)

    @contextmanager
    def _node(self, path: str) -> Iterator[int]:
        with self._parent(path) as (parent, name):
            try:
                fd = os.open(name, NODE_FLAGS, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise GuestRefused(guest_path=path, detail="it is a symlink") from None
                raise
            try:
                yield fd
            finally:
                os.close(fd)

    def lstat(self, path: str) -> GuestStat | None:
        try:
            with self._parent(path) as (parent, name):
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except GuestRefused:
            raise
        except NotADirectoryError:
            return None
        return GuestStat(
            kind=kind_of_mode(st.st_mode),
            mode=stat.S_IMODE(st.st_mode),
            uid=st.st_uid,
            gid=st.st_gid,
        )

    def readlink(self, path: str) -> str:
        with self._parent(path) as (parent, name):
            return os.readlink(name, dir_fd=parent)

    def read(self, path: str) -> bytes:
        with self._node(path) as fd:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise GuestRefused(guest_path=path, detail="it is not a regular file")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)

    def write(self, path: str, data: bytes) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        with self._parent(path) as (parent, name):
            try:
                existing = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None and stat.S_ISLNK(existing.st_mode):
                raise GuestRefused(guest_path=path, detail="it is a symlink")
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                # Checked before opening: opening a FIFO or device has effects of its own.
                raise GuestRefused(guest_path=path, detail="it is not a regular file")
            try:
                fd = os.open(name, flags, 0o600, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise GuestRefused(guest_path=path, detail="it is a symlink") from None
                raise
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise GuestRefused(guest_path=path, detail="it is not a regular file")
                # Truncate only once we know it is a regular file; same inode, so mode,
                # owner and labels stay.
                os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    def mkdir(self, path: str) -> None:
        with self._parent(path) as (parent, name):
            os.mkdir(name, 0o700, dir_fd=parent)

    def chmod(self, path: str, mode: int) -> None:
        # chmod has no "don't follow" on Linux; a descriptor opened with O_NOFOLLOW does it.
        with self._node(path) as fd:
            os.fchmod(fd, mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        with self._node(path) as fd:
            os.fchown(fd, uid, gid)
