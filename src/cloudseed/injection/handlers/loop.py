"""Raw images through a loop device and a host mount; needs root and free loop devices.

Never a copy-on-write image: a loop device shows the file's bytes, which for qcow2 are the
format's own structures, not the guest's disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from cloudseed.injection.errors import HandlerUnavailable
from cloudseed.injection.handlers.localfs import LocalFilesystem
from cloudseed.injection.handlers.protocol import ImageTarget
from cloudseed.injection.tools import mounts, partitions


@contextmanager
def open_guest(target: ImageTarget) -> Iterator[LocalFilesystem]:
    if target.fmt != "raw":
        raise HandlerUnavailable(
            f"loop devices show raw images only, never a copy-on-write ({target.fmt}) image"
        )
    if target.partition < 0:
        raise HandlerUnavailable(
            "finding the root filesystem by inspection (partition -1) needs guestfs"
        )
    if os.geteuid() != 0:
        raise HandlerUnavailable("loop devices and mounting need root")
    missing = mounts.missing_tools("losetup", "mount", "umount")
    if missing:
        raise HandlerUnavailable(f"{', '.join(missing)} not installed (mount, util-linux)")
    if not os.path.exists("/dev/loop-control"):
        raise HandlerUnavailable(
            "the kernel has no loop device support (/dev/loop-control missing)"
        )
    offset, size = partitions.locate(target.path, target.partition, timeout=target.timeout)
    with (
        mounts.loop_device(target.path, offset=offset, size=size, timeout=target.timeout) as device,
        mounts.mounted(device, timeout=target.timeout) as root,
    ):
        yield LocalFilesystem(root)
