"""Disk image injection: key, admin password, metadata, network config and files written
straight into an instance's disk, for guests without cloud-init (Nova's libvirt injection).

IO-free modules: ``request.py`` (what and how), ``network.py`` (interfaces file),
``guestfiles.py`` (file contents), ``formats.py`` (image headers), ``guest.py`` (the
filesystem seam) and ``writer.py`` (what goes where, through that seam). Everything that runs a
program or touches an image is under ``tools/`` (one module per program) and ``handlers/``
(one module per way into an image); ``service.inject`` ties them together.
"""

from __future__ import annotations

from cloudseed.injection.errors import (
    GuestRefused,
    HandlerUnavailable,
    ImageFormatMismatch,
    ImageToolFailed,
    InjectionDisabled,
    InvalidInjectionRequest,
    NoHandlerAvailable,
    UnsafeImage,
)
from cloudseed.injection.network import render_interfaces
from cloudseed.injection.request import InjectionOptions, InjectionRequest
from cloudseed.injection.service import InjectionReport, inject

__all__ = [
    "GuestRefused",
    "HandlerUnavailable",
    "ImageFormatMismatch",
    "ImageToolFailed",
    "InjectionDisabled",
    "InjectionOptions",
    "InjectionReport",
    "InjectionRequest",
    "InvalidInjectionRequest",
    "NoHandlerAvailable",
    "UnsafeImage",
    "inject",
    "render_interfaces",
]
