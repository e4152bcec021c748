"""Attaching images as block devices and mounting them: ``losetup``, ``mount``, ``umount``.

Mounts are ``nosuid,nodev,noexec`` on a private temporary directory; the caller reaches files
only through ``handlers.localfs`` (no symlink following). Only the filesystem types a Linux
guest's root uses are tried, so a crafted image cannot pick an obscure kernel driver.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cloudseed.injection.errors import HandlerUnavailable, ImageToolFailed
from cloudseed.programs import run as program

FILESYSTEM_TYPES = "ext4,ext3,ext2,xfs,btrfs"
MOUNT_OPTIONS = "nosuid,nodev,noexec"


def missing_tools(*tools: str) -> list[str]:
    return [tool for tool in tools if program.which(tool) is None]


@contextmanager
def loop_device(image: Path, *, offset: int, size: int | None, timeout: float) -> Iterator[str]:
    """A free loop device showing ``image`` from ``offset`` (``size`` bytes, or to the end)."""
    argv = ["losetup", "--find", "--show"]
    if offset:
        argv += ["--offset", str(offset)]
    if size is not None:
        argv += ["--sizelimit", str(size)]
    result = program.run([*argv, str(image)], timeout=timeout, check=False)
    device = result.stdout.decode().strip()
    if result.returncode != 0 or not device.startswith("/dev/"):
        raise HandlerUnavailable(
            f"losetup could not attach the image: {program.stderr_tail(result.stderr)}"
        )
    try:
        yield device
    finally:
        program.run(["losetup", "--detach", device], timeout=timeout)


@contextmanager
def mounted(device: str, *, timeout: float) -> Iterator[Path]:
    """``device`` mounted on a fresh private directory; unmounted (flushed) on exit."""
    mountpoint = Path(tempfile.mkdtemp(prefix="cloudseed-mount-"))
    try:
        result = program.run(
            ["mount", "-t", FILESYSTEM_TYPES, "-o", MOUNT_OPTIONS, device, str(mountpoint)],
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise HandlerUnavailable(f"mount failed: {program.stderr_tail(result.stderr)}")
        try:
            yield mountpoint
        finally:
            # Unmounting writes everything back; if it fails, the copy is not to be trusted,
            # and the error reaches the service, which then discards the copy.
            program.run(["umount", str(mountpoint)], timeout=timeout)
    finally:
        try:
            os.rmdir(mountpoint)
        except OSError as exc:  # still mounted after a failed umount: leave it for the admin
            raise ImageToolFailed(
                tool="umount", detail=f"{mountpoint} left behind: {exc}"
            ) from None
