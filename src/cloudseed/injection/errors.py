"""Injection errors. Context travels as attributes; the message is what an operator reads.

InvalidInput ─────── InvalidInjectionRequest   a guest path, password or option is unusable
             ├────── InjectionDisabled         [libvirt] inject_partition is -2
             ├────── ImageFormatMismatch       the image is not in the declared format
             └────── UnsafeImage               backing file or external data file refused
Conflict ─────────── GuestRefused              the guest's own files do not allow it:
                                               a symlink on the way, root missing from
                                               /etc/shadow, a directory where a file goes
ServiceUnavailable ─ HandlerUnavailable        one handler cannot serve this image (the
             │                                 service catches it and tries the next)
             ├────── NoHandlerAvailable        every handler said why not; ``reasons``
             └────── ProgramFailed             (cloudseed.programs) qemu-img, debugfs,
                     │                         mount … not installed, failed or timed out
                     └── ImageToolFailed       a tool's answer was unusable, or a step
                         │                     around it (working copy, unmount) failed
                         └── DebugfsError      one debugfs request failed
Exception ────────── BindingMissing            the libguestfs binding cannot be loaded
"""

from __future__ import annotations

from collections.abc import Sequence

from cloudseed.errors import Conflict, InvalidInput, ServiceUnavailable
from cloudseed.programs.errors import ProgramFailed


class InvalidInjectionRequest(InvalidInput):
    pass


class InjectionDisabled(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Image injection is disabled ([libvirt] inject_partition = -2).")


class ImageFormatMismatch(InvalidInput):
    def __init__(self, *, path: str, declared: str, detail: str) -> None:
        super().__init__(f"Image {path} is not a {declared} image: {detail}")
        self.path = path
        self.declared = declared
        self.detail = detail


class UnsafeImage(InvalidInput):
    def __init__(self, *, path: str, detail: str) -> None:
        super().__init__(f"Refusing image {path}: {detail}")
        self.path = path
        self.detail = detail


class GuestRefused(Conflict):
    def __init__(self, *, guest_path: str, detail: str) -> None:
        super().__init__(f"Cannot write {guest_path} in the guest: {detail}")
        self.guest_path = guest_path
        self.detail = detail


class HandlerUnavailable(ServiceUnavailable):
    """Raised by a handler before it changed anything, so the next handler can be tried."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NoHandlerAvailable(ServiceUnavailable):
    def __init__(self, reasons: Sequence[tuple[str, str]]) -> None:
        listed = "; ".join(f"{name}: {reason}" for name, reason in reasons) or "none configured"
        super().__init__(f"No image handler can inject into this image ({listed}).")
        self.reasons = tuple(reasons)


class ImageToolFailed(ProgramFailed):
    def __init__(self, *, tool: str, detail: str, returncode: int | None = None) -> None:
        super().__init__(program=tool, detail=detail, returncode=returncode)


class DebugfsError(ImageToolFailed):
    def __init__(self, request: str, detail: str) -> None:
        super().__init__(tool="debugfs", detail=f"{request!r}: {detail}")
        self.request = request


class BindingMissing(Exception):
    """The libguestfs Python binding is not installed where we look (the guestfs handler
    is then unavailable)."""
