"""A compute agent's image cache: the images its guests boot from, downloaded from the API's
Glance slice over HTTP into a directory of the agent's own (Nova's ``_base``), never read from
the API node's store.

Layout of the directory (``<state_path>/_base``, ``[image_cache] subdirectory_name``):

- ``<sha256>``: an image's data, named by its SHA-256 (the registry's ``os_hash_value``; an
  image recorded with only an MD5 is ``md5-<md5>``). Named by content, not by image id: a qcow2
  overlay names its backing file by path, and an id can be given to other data later (delete,
  then create with the same id), while these bytes never change under a guest. Read-only.
- ``.<name>.partial``: a download under way, or cut short (kept, and resumed with ``Range``
  by the next attempt, also after the agent was killed; evicted as an unused entry is).
- ``.locks/<name>.lock``: one ``flock`` per entry. A download holds it, so concurrent boots of
  one image on one host (threads of an agent, or several agents sharing the host's state
  directory) fetch it once: the others wait, then find it there. Lock files are never removed
  (removing one while another process waits on it would let two hold "the" lock).
- ``.guests/<instance uuid>``: the entries a guest of this host uses (disk, kernel,
  initramfs), one a line, written before they are fetched. Eviction keeps every entry a live
  guest lists, so an overlay's backing file or a kernel is never removed under a guest.

A download (``download.py``) is checked as an upload is checked at the API: the size must be
the registry's (reading stops one byte past it), the SHA-256 the registry's (as Nova checks
Glance's ``os_hash_value``; the MD5 ``checksum`` for an image recorded without one), and the
content the declared format, standalone and within ``[glance] image_virtual_size_cap``
(``contents.py``); only then is it fsynced and renamed into place.

Eviction (``evict``, the agent's image cache manager, every ``[image_cache] manager_interval``)
removes entries no live guest lists that have been unused for
``remove_unused_original_minimum_age_seconds``: an entry's mtime is its last use (set when a
guest asks for it and by each pass while a guest uses it).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from cloudseed.compute.interfaces import BootImage
from cloudseed.images.download import ImageDownloader
from cloudseed.images.errors import ImageFetchFailed
from cloudseed.images.service import BootSource, ImageData

log = logging.getLogger(__name__)

LOCKS, GUESTS = ".locks", ".guests"
_NAME = re.compile(r"^(md5-)?[0-9a-f]{32,64}$")
_PARTIAL = re.compile(r"^\.(.+)\.partial$")
_GUEST = re.compile(r"^[0-9A-Za-z-]{1,64}$")
# How long a download that failed is the answer for callers that waited for it (this process).
FAILURE_MEMORY_SECONDS = 10.0


class ImageCache:
    """The cache in ``directory``, filled by ``downloads``."""

    def __init__(self, directory: Path, downloads: ImageDownloader) -> None:
        self.directory = directory.resolve()
        self.downloads = downloads
        self._failed_lock = threading.Lock()
        self._failed: dict[str, tuple[float, ImageFetchFailed]] = {}

    # -- what the agent asks ------------------------------------------------------------------

    def boot_image(self, source: BootSource, *, guest: str) -> BootImage:
        """The files on this host that ``guest`` boots ``source`` from, fetched when missing.
        The guest is recorded as their user first, so no eviction removes them meanwhile."""
        self.use(guest, [entry_name(d) for d in source.all_data()])
        paths = {d.image_id: str(self.fetch(d)) for d in source.all_data()}
        return BootImage(
            path=paths[source.disk.image_id],
            disk_format=source.disk.disk_format,
            kernel_path=paths[source.kernel.image_id] if source.kernel else None,
            ramdisk_path=paths[source.ramdisk.image_id] if source.ramdisk else None,
            cmdline=source.cmdline,
            cdrom_bus=source.cdrom_bus,
            bootstrap=source.bootstrap,
        )

    def fetch(self, data: ImageData) -> Path:
        """The path of ``data`` in the cache, downloaded first when it is not there (once per
        host: concurrent callers wait for the one download). ImageFetchFailed when it cannot
        be had."""
        name = entry_name(data)
        final = self.directory / name
        with self._locked(name):
            if final.is_file():
                _touch(final)
                return final
            # Builds that waited for a download which just failed (every attempt, for about
            # half a minute) fail with it, rather than each trying as long again in turn.
            with self._failed_lock:
                failed = self._failed.get(name)
            if failed is not None and time.monotonic() - failed[0] < FAILURE_MEMORY_SECONDS:
                raise failed[1]
            started = time.monotonic()
            try:
                fetched = self.downloads.download(data, self.directory / f".{name}.partial", final)
            except ImageFetchFailed as exc:
                with self._failed_lock:
                    self._failed[name] = (time.monotonic(), exc)
                raise
            with self._failed_lock:
                self._failed.pop(name, None)
            fetched.seconds = time.monotonic() - started
            log.info(
                "image %s fetched into the cache: %d bytes in %.1f s (%d request(s))",
                data.image_id,
                data.size,
                fetched.seconds,
                fetched.requests,
            )
        return final

    def use(self, guest: str, names: list[str]) -> None:
        """Record that ``guest`` uses the entries ``names`` (replacing what it used before)."""
        if not _GUEST.match(guest):
            raise ValueError(f"not an instance uuid: {guest!r}")
        directory = self.directory / GUESTS
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f".{guest}.tmp"
        partial.write_text("".join(f"{n}\n" for n in names))
        os.replace(partial, directory / guest)

    def forget(self, guest: str) -> None:
        """``guest`` is gone from this host: its entries are no longer its."""
        if _GUEST.match(guest):
            (self.directory / GUESTS / guest).unlink(missing_ok=True)

    def evict(
        self, live: set[str], *, since: float, min_age: float, remove: bool = True
    ) -> list[str]:
        """Remove the entries no guest in ``live`` uses that went unused for ``min_age``
        seconds; the names removed. ``live``: the guests of this host (the database's and the
        driver's), read at ``since`` (a time.time()): a guest recorded after that counts as
        live, and only older records of other guests are dropped. With ``remove`` False, only
        the last-use times of entries in use are kept up to date."""
        now = time.time()
        in_use = self._in_use(live, since=since, drop_stale=True)
        removed: list[str] = []
        if not self.directory.is_dir():
            return removed
        for entry in sorted(self.directory.iterdir()):
            partial = _PARTIAL.match(entry.name)
            name = partial.group(1) if partial else entry.name
            if not _NAME.match(name):
                continue
            if name in in_use:
                _touch(entry)
                continue
            age = now - _mtime(entry)
            if not remove or age < min_age:
                continue
            with self._locked(name, wait=False) as held:
                # Under the entry's lock, and with the records read again: a guest that asked
                # for it since is either recorded now, or waits for this lock and then fetches.
                if not held or name in self._in_use(live, since=since, drop_stale=False):
                    continue
                entry.unlink(missing_ok=True)
                removed.append(entry.name)
                log.info("image cache: removed %s, unused for %.0f s", entry.name, age)
        return removed

    def entries(self) -> list[str]:
        """The names of the complete entries in the cache."""
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if _NAME.match(p.name))

    def close(self) -> None:
        self.downloads.close()

    # -- the pieces ---------------------------------------------------------------------------

    def _in_use(self, live: set[str], *, since: float, drop_stale: bool) -> set[str]:
        used: set[str] = set()
        directory = self.directory / GUESTS
        if not directory.is_dir():
            return used
        for record in directory.iterdir():
            if record.name.startswith("."):
                continue
            try:
                recorded_at = record.stat().st_mtime
                names = record.read_text().split()
            except FileNotFoundError:
                continue
            if record.name in live or recorded_at >= since:
                used.update(names)
            elif drop_stale:
                record.unlink(missing_ok=True)
        return used

    @contextlib.contextmanager
    def _locked(self, name: str, *, wait: bool = True) -> Iterator[bool]:
        locks = self.directory / LOCKS
        locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)


def entry_name(data: ImageData) -> str:
    """The cache's name for the data: its SHA-256, else its MD5. ImageFetchFailed for an image
    with neither: what arrives could not be checked."""
    if data.checksum_sha256:
        return data.checksum_sha256.lower()
    if data.checksum_md5:
        return f"md5-{data.checksum_md5.lower()}"
    raise ImageFetchFailed(data.image_id, "the registry has no checksum for it")


def _touch(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.utime(path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()
