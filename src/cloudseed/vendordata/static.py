"""StaticJSON: the operator's vendordata file, checked at start and re-read when it changes.

Nova reads the file for every instance it renders and answers 500 while the file is broken.
Here a missing or invalid file stops start-up (the operator sees it at once), and an edit made
while running is picked up within ``check_interval`` seconds without a restart; an edit that
breaks the file is logged and ignored, and the last good content goes on being served.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from cloudseed.vendordata import documents
from cloudseed.vendordata.errors import NotJSON, VendordataFileError

log = logging.getLogger(__name__)

DEFAULT_CHECK_INTERVAL = 1.0  # seconds between two stat() calls
# What identifies one version of the file: an editor that writes a new file and renames it
# over the old one changes the inode even within the same mtime tick.
Signature = tuple[int, int, int, int]


def _signature(stat: os.stat_result) -> Signature:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_dev)


class StaticFile:
    """The file's content as compact JSON bytes; ``{}`` when no path is configured."""

    def __init__(
        self,
        path: str,
        *,
        check_interval: float = DEFAULT_CHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._check_interval = check_interval
        self._clock = clock
        self._content = documents.EMPTY_OBJECT
        self._signature: Signature | None = None
        self._refused: Signature | None = None  # the broken version already reported
        self._next_check = float("inf")  # no file, nothing to watch
        if path:
            self._signature, self._content = self._load()
            self._next_check = clock() + check_interval

    def content(self) -> bytes:
        """The last good content, after a stat() if the last one is older than the interval."""
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + self._check_interval
            self._reload_if_changed()
        return self._content

    def _load(self) -> tuple[Signature, bytes]:
        try:
            with open(self.path, "rb") as file:
                # Stat the open file, before reading it: if it changes meanwhile, the next
                # check sees a new signature and reads it again.
                signature = _signature(os.fstat(file.fileno()))
                text = file.read()
        except OSError as exc:
            raise VendordataFileError(path=self.path, reason=exc.strerror or str(exc)) from None
        try:
            return signature, documents.compact(documents.parse(text))
        except NotJSON as exc:
            raise VendordataFileError(path=self.path, reason=f"not valid JSON: {exc}") from None

    def _reload_if_changed(self) -> None:
        try:
            current = _signature(os.stat(self.path))
        except OSError as exc:
            current = (-1, -1, -1, -1)  # gone: reported once, like a broken version
            if self._refused != current:
                self._refused = current
                log.error(
                    "vendordata file %s: %s; still serving its last good content",
                    self.path,
                    exc.strerror or exc,
                )
            return
        if current in (self._signature, self._refused):
            return
        try:
            self._signature, self._content = self._load()
        except VendordataFileError as exc:
            self._refused = current
            log.error("%s; still serving the last good content", exc.message)
            return
        self._refused = None
        log.info("vendordata file %s reloaded", self.path)
