"""Any qemu format through ``qemu-nbd`` and a host mount; needs root and the nbd module.

The kernel names a connected image's partitions ``/dev/nbdXpN`` (module parameter
``max_part``); without them only whole-disk injection (partition 0) works.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cloudseed.injection.errors import HandlerUnavailable
from cloudseed.injection.handlers.localfs import LocalFilesystem
from cloudseed.injection.handlers.protocol import ImageTarget
from cloudseed.injection.tools import mounts
from cloudseed.programs import run as program

SYS_BLOCK = Path("/sys/block")
POLL_SECONDS = 0.1


def _free_device() -> str:
    for candidate in sorted(SYS_BLOCK.glob("nbd*"), key=lambda p: int(p.name[3:] or 0)):
        # A connected device has a pid file naming its qemu-nbd.
        if not (candidate / "pid").exists():
            return candidate.name
    raise HandlerUnavailable("every nbd device is in use")


def _wait_for(path: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(POLL_SECONDS)
    return path.exists()


@contextmanager
def _connected(target: ImageTarget) -> Iterator[str]:
    name = _free_device()
    device = f"/dev/{name}"
    result = program.run(
        ["qemu-nbd", "--format", target.fmt, "--connect", device, str(target.path)],
        timeout=target.timeout,
        check=False,
    )
    if result.returncode != 0:
        raise HandlerUnavailable(
            f"qemu-nbd could not connect: {program.stderr_tail(result.stderr)}"
        )
    try:
        if not _wait_for(SYS_BLOCK / name / "pid", target.timeout):
            raise HandlerUnavailable(f"{device} did not come up within {target.timeout:g} s")
        yield device
    finally:
        program.run(["qemu-nbd", "--disconnect", device], timeout=target.timeout)


@contextmanager
def open_guest(target: ImageTarget) -> Iterator[LocalFilesystem]:
    if target.partition < 0:
        raise HandlerUnavailable(
            "finding the root filesystem by inspection (partition -1) needs guestfs"
        )
    if os.geteuid() != 0:
        raise HandlerUnavailable("nbd devices and mounting need root")
    if not (SYS_BLOCK / "nbd0").exists():
        raise HandlerUnavailable(
            "the nbd kernel module is not loaded (/sys/block/nbd0 "
            "missing; modprobe nbd max_part=16)"
        )
    missing = mounts.missing_tools("qemu-nbd", "mount", "umount")
    if missing:
        raise HandlerUnavailable(f"{', '.join(missing)} not installed (qemu-utils, mount)")
    with _connected(target) as device:
        if target.partition:
            device = f"{device}p{target.partition}"
            if not _wait_for(Path(device), min(target.timeout, 10.0)):
                raise HandlerUnavailable(
                    f"{device} does not exist (no partition "
                    f"{target.partition}, or nbd loaded without max_part)"
                )
        with mounts.mounted(device, timeout=target.timeout) as root:
            yield LocalFilesystem(root)
