"""The one qemu-img wrapper: ``info`` on an image we do not trust, ``create_overlay``,
``convert_to_raw`` and ``grow`` for the qemu driver's disks.

The format is always stated (``-f``, ``-F``), never probed: a raw image whose first bytes look
like qcow2 must not be read as one (CVE-2015-5162 and friends). ``info`` is hardened as Nova's
privsep helper does it: ``--force-share`` (a running guest may hold the lock), JSON output, and
``prlimit`` limits on address space and CPU time, because a crafted image can make qemu-img
allocate or spin without bound. ``prlimit`` rather than ``preexec_fn`` + ``setrlimit``: the
service runs in worker threads, where ``preexec_fn`` is unsafe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cloudseed.programs import run as program
from cloudseed.programs.errors import ImageUnreadable, ProgramFailed

# Nova's values (nova/privsep/qemu.py): 1 GiB of address space, 30 s of CPU.
ADDRESS_SPACE_LIMIT = 1 << 30
CPU_SECONDS_LIMIT = 30
# Killed by SIGKILL (address space) or SIGXCPU (CPU time), seen directly or through prlimit.
LIMIT_EXITS = (-9, 128 + 9, -24, 128 + 24)
DEFAULT_TIMEOUT = 120.0


@dataclass(frozen=True)
class ImageInfo:
    format: str
    virtual_size: int
    backing_file: str | None
    data_file: str | None


def info(path: Path, fmt: str, *, timeout: float = 60.0) -> ImageInfo:
    """What qemu-img reads in ``path`` taken as ``fmt``; ``ImageUnreadable`` if it cannot."""
    if program.which("prlimit") is None:
        raise ProgramFailed(program="prlimit", detail="not installed (util-linux)")
    argv = [
        "prlimit",
        f"--as={ADDRESS_SPACE_LIMIT}",
        f"--cpu={CPU_SECONDS_LIMIT}",
        "--",
        "qemu-img",
        "info",
        "--force-share",
        "--output=json",
        "-f",
        fmt,
        str(path),
    ]
    result = program.run(argv, timeout=timeout, check=False)
    if result.returncode in LIMIT_EXITS:
        # The limits stopped it: a hostile image, or limits too tight for a real one. Which,
        # qemu-img cannot say, so it stays the server's failure (503), not the data's.
        raise ProgramFailed(
            program="qemu-img",
            returncode=result.returncode,
            detail="stopped by its resource limits (address space or CPU)",
        )
    if result.returncode != 0:
        raise ImageUnreadable(
            path=str(path),
            fmt=fmt,
            returncode=result.returncode,
            stderr=program.stderr_tail(result.stderr),
        )
    try:
        data = json.loads(result.stdout)
    except ValueError:
        raise ProgramFailed(program="qemu-img", detail="info output is not JSON") from None
    specific = (data.get("format-specific") or {}).get("data") or {}
    return ImageInfo(
        format=str(data.get("format")),
        virtual_size=int(data["virtual-size"]),
        backing_file=data.get("backing-filename"),
        data_file=specific.get("data-file"),
    )


def create_overlay(
    disk: Path, *, backing: Path, backing_format: str, timeout: float = DEFAULT_TIMEOUT
) -> None:
    """A new qcow2 ``disk`` on top of ``backing`` (absolute path, format stated)."""
    program.run(
        [
            "qemu-img",
            "create",
            "-q",
            "-f",
            "qcow2",
            "-F",
            backing_format,
            "-b",
            str(backing.resolve()),
            str(disk),
        ],
        timeout=timeout,
    )


def convert_to_raw(
    source: Path, *, source_format: str, disk: Path, timeout: float = DEFAULT_TIMEOUT
) -> None:
    """A sparse raw copy of ``source`` (runs of 4 KiB of zeros become holes)."""
    program.run(
        [
            "qemu-img",
            "convert",
            "-q",
            "-f",
            source_format,
            "-O",
            "raw",
            "-S",
            "4k",
            str(source.resolve()),
            str(disk),
        ],
        timeout=timeout,
    )


def grow(disk: Path, *, fmt: str, size: int, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Make ``disk`` (taken as ``fmt``) ``size`` bytes long. Only ever grows: qemu-img refuses
    to shrink without ``--shrink``, which is never passed, so a wrong size cannot cut a
    guest's data off."""
    if size <= 0:
        raise ValueError(f"invalid disk size {size}")
    program.run(
        ["qemu-img", "resize", "-q", "-f", fmt, str(disk), str(size)],
        timeout=timeout,
    )
