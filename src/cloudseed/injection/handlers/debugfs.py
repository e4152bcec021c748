"""Raw images with an ext2/3/4 filesystem, without root: e2fsprogs' ``debugfs -w``.

debugfs works on the filesystem's own structures inside the image file, so nothing is mounted
and no host path is ever involved: a guest symlink, absolute or not, resolves (if at all)
inside the image. It replaces a file by ``rm`` and ``write`` (``write`` refuses an existing
name), which makes a new inode: mode and owner are copied over, extended attributes such as
SELinux labels are not, which the relabel hook in ``writer.py`` covers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cloudseed.injection.errors import DebugfsError, GuestRefused, HandlerUnavailable
from cloudseed.injection.guest import GuestStat
from cloudseed.injection.handlers.protocol import ImageTarget
from cloudseed.injection.tools import partitions
from cloudseed.injection.tools.debugfs import (
    EXT_MAGIC,
    SUPERBLOCK_MAGIC_OFFSET,
    Debugfs,
    quote,
)
from cloudseed.programs import run as program

TYPE_BITS = {"file": 0o100000, "dir": 0o040000, "symlink": 0o120000}


class DebugfsFilesystem:
    def __init__(self, debugfs: Debugfs, workdir: Path) -> None:
        self.debugfs = debugfs
        self.workdir = workdir

    def lstat(self, path: str) -> GuestStat | None:
        st = self.debugfs.stat(path)
        return None if st is None else GuestStat(kind=st.kind, mode=st.mode, uid=st.uid, gid=st.gid)

    def readlink(self, path: str) -> str:
        st = self.debugfs.stat(path)
        if st is None or st.kind != "symlink":
            raise GuestRefused(guest_path=path, detail="it is not a symlink")
        if st.fast_link is not None:
            return st.fast_link
        # A long target lives in a data block, which ``cat`` prints.
        return self.debugfs.request(f"cat {quote(path)}").decode("utf-8", "surrogateescape")

    def read(self, path: str) -> bytes:
        return self.debugfs.request(f"cat {quote(path)}")

    def write(self, path: str, data: bytes) -> None:
        before = self.debugfs.stat(path)
        source = self.workdir / "content"
        source.write_bytes(data)
        if before is not None:
            self.debugfs.request(f"rm {quote(path)}", write=True)
        self.debugfs.request(f"write {source} {quote(path)}", write=True)
        # The new inode took our temporary file's mode and owner; give it the old ones.
        mode, uid, gid = (0o600, 0, 0) if before is None else (before.mode, before.uid, before.gid)
        self._set(path, "file", mode, uid, gid)

    def mkdir(self, path: str) -> None:
        self.debugfs.request(f"mkdir {quote(path)}", write=True)

    def chmod(self, path: str, mode: int) -> None:
        st = self._existing(path)
        self._set(path, st.kind, mode, st.uid, st.gid)

    def chown(self, path: str, uid: int, gid: int) -> None:
        st = self._existing(path)
        self._set(path, st.kind, st.mode, uid, gid)

    def _existing(self, path: str) -> GuestStat:
        st = self.lstat(path)
        if st is None:
            raise GuestRefused(guest_path=path, detail="it does not exist")
        return st

    def _set(self, path: str, kind: str, mode: int, uid: int, gid: int) -> None:
        if kind not in TYPE_BITS:
            raise GuestRefused(guest_path=path, detail="it is not a file or directory")
        # set_inode_field's mode is the whole i_mode, so the type bits go with it.
        self.debugfs.request(f"sif {quote(path)} mode 0{TYPE_BITS[kind] | mode:o}", write=True)
        self.debugfs.request(f"sif {quote(path)} uid {uid}", write=True)
        self.debugfs.request(f"sif {quote(path)} gid {gid}", write=True)


def _has_ext_superblock(image: Path, offset: int) -> bool:
    with image.open("rb") as fh:
        fh.seek(offset + SUPERBLOCK_MAGIC_OFFSET)
        return fh.read(2) == EXT_MAGIC


@contextmanager
def open_guest(target: ImageTarget) -> Iterator[DebugfsFilesystem]:
    if program.which("debugfs") is None:
        raise HandlerUnavailable("debugfs is not installed (e2fsprogs)")
    if target.fmt != "raw":
        raise HandlerUnavailable(f"debugfs reads raw images only, this one is {target.fmt}")
    if target.partition < 0:
        raise HandlerUnavailable(
            "finding the root filesystem by inspection (partition -1) needs guestfs"
        )
    offset, _ = partitions.locate(target.path, target.partition, timeout=target.timeout)
    where = "the image" if target.partition == 0 else f"partition {target.partition}"
    if not _has_ext_superblock(target.path, offset):
        raise HandlerUnavailable(f"no ext2/3/4 filesystem on {where}")
    with tempfile.TemporaryDirectory(prefix="cloudseed-debugfs-") as work:
        workdir = Path(work)
        # debugfs reads "name?offset=N" as options, so it is given a link with a plain name
        # rather than the image path itself, which might contain a '?'.
        link = workdir / "image"
        link.symlink_to(target.path.resolve())
        device = f"{link}?offset={offset}" if offset else str(link)
        debugfs = Debugfs(device, timeout=target.timeout)
        try:
            features = debugfs.features()
        except DebugfsError as exc:
            # A filesystem this debugfs cannot open (newer features, damage): another
            # handler may still manage.
            raise HandlerUnavailable(
                f"debugfs cannot open the filesystem on {where}: {exc.detail}"
            ) from None
        if "needs_recovery" in features:
            raise HandlerUnavailable(
                f"the filesystem on {where} has a journal to replay, which debugfs does not do"
            )
        yield DebugfsFilesystem(debugfs, workdir)
