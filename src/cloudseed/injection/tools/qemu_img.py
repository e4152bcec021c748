"""``qemu-img info`` on an untrusted image, hardened as Nova's privsep helper does.

Always an explicit ``-f`` (never probing), ``--force-share``, JSON output, ``LC_ALL=C`` and
``prlimit`` limits on address space and CPU time, because a crafted image can make qemu-img
allocate or spin without bound. ``prlimit`` rather than ``preexec_fn`` + ``setrlimit``: the
service runs in worker threads, where ``preexec_fn`` is unsafe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cloudseed.injection import formats
from cloudseed.injection.errors import ImageFormatMismatch, ImageToolFailed, UnsafeImage
from cloudseed.injection.tools import commands

# Nova's values (nova/privsep/qemu.py): 1 GiB of address space, 30 s of CPU.
ADDRESS_SPACE_LIMIT = 1 << 30
CPU_SECONDS_LIMIT = 30


@dataclass(frozen=True)
class ImageInfo:
    format: str
    virtual_size: int
    backing_file: str | None
    data_file: str | None


def info(path: Path, fmt: str, *, timeout: float = 60.0) -> ImageInfo:
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
    if commands.which("prlimit") is None:
        raise ImageToolFailed(tool="prlimit", detail="not installed (util-linux)")
    result = commands.run(argv, timeout=timeout, check=False)
    if result.returncode in (-9, 128 + 9, -24, 128 + 24):
        # SIGKILL or SIGXCPU: the limits stopped it, which is itself a sign of a hostile image.
        raise ImageToolFailed(
            tool="qemu-img",
            returncode=result.returncode,
            detail="stopped by its resource limits (address space or CPU)",
        )
    if result.returncode != 0:
        raise ImageFormatMismatch(
            path=str(path), declared=fmt, detail=commands.stderr_tail(result.stderr)
        )
    try:
        data = json.loads(result.stdout)
    except ValueError:
        raise ImageToolFailed(tool="qemu-img", detail="output is not JSON") from None
    specific = (data.get("format-specific") or {}).get("data") or {}
    return ImageInfo(
        format=str(data.get("format")),
        virtual_size=int(data["virtual-size"]),
        backing_file=data.get("backing-filename"),
        data_file=specific.get("data-file"),
    )


def verify(
    path: Path, fmt: str, *, allow_backing_file: bool = False, timeout: float = 60.0
) -> ImageInfo:
    """The image's info, after checking it really is ``fmt`` and needs no other file we did
    not choose; raises ``ImageFormatMismatch`` or ``UnsafeImage``."""
    image = info(path, fmt, timeout=timeout)
    if image.format != fmt:
        raise ImageFormatMismatch(
            path=str(path), declared=fmt, detail=f"qemu-img reads it as {image.format}"
        )
    if fmt == "raw":
        with path.open("rb") as fh:
            found = formats.detect(fh.read(formats.HEADER_BYTES))
        if found is not None:
            raise ImageFormatMismatch(
                path=str(path), declared=fmt, detail=f"its header is a {found} header"
            )
    if image.data_file:
        raise UnsafeImage(
            path=str(path), detail=f"it has an external data file ({image.data_file})"
        )
    if image.backing_file and not allow_backing_file:
        raise UnsafeImage(
            path=str(path), detail=f"it has a backing file ({image.backing_file}); flatten it first"
        )
    return image
