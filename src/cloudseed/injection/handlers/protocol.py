"""What the service hands a handler, and what a handler gives back.

A handler is a context manager factory: ``open(target)`` yields a ``GuestFilesystem`` on the
image and, on a clean exit, leaves every change written to the image file. It raises
``HandlerUnavailable`` with a reason, *before changing anything*, when it cannot serve the
image (missing tool or privilege, wrong format, unsupported partition option), so the service
can try the next one; any later error is a failure of the injection.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from cloudseed.injection.guest import GuestFilesystem


@dataclass(frozen=True)
class ImageTarget:
    path: Path  # the working copy, never the original
    fmt: str  # verified with qemu-img
    partition: int  # -1 inspect, 0 whole disk, N partition N
    timeout: float  # for each tool call


OpenGuest = Callable[[ImageTarget], AbstractContextManager[GuestFilesystem]]
