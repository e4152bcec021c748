"""Where partition N of a raw image starts, from ``sfdisk --json`` (works on a plain file,
without root, for MBR and GPT tables)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cloudseed.injection.errors import HandlerUnavailable, ImageToolFailed
from cloudseed.programs import run as program


@dataclass(frozen=True)
class Partition:
    number: int
    offset: int  # bytes from the start of the image
    size: int  # bytes


def partitions(image: Path, *, timeout: float = 60.0) -> list[Partition]:
    if program.which("sfdisk") is None:
        raise HandlerUnavailable(
            "sfdisk is not installed (fdisk package), so partitions cannot be located"
        )
    result = program.run(["sfdisk", "--json", str(image)], timeout=timeout, check=False)
    if result.returncode != 0 or not result.stdout.strip():
        return []  # no partition table
    try:
        table = json.loads(result.stdout)["partitiontable"]
    except (ValueError, KeyError):
        raise ImageToolFailed(tool="sfdisk", detail="unexpected --json output") from None
    sector = int(table.get("sectorsize", 512))
    found = []
    for entry in table.get("partitions", []):
        # Nodes are "<image path><N>"; the number is what follows the path.
        node = str(entry["node"])
        digits = node[len(str(image)) :] if node.startswith(str(image)) else node
        number = "".join(c for c in digits if c.isdigit())
        if number:
            found.append(
                Partition(
                    number=int(number),
                    offset=int(entry["start"]) * sector,
                    size=int(entry["size"]) * sector,
                )
            )
    return found


def locate(image: Path, partition: int, *, timeout: float = 60.0) -> tuple[int, int | None]:
    """(offset, size) of the filesystem: the whole image for 0, partition N otherwise."""
    if partition == 0:
        return 0, None
    for candidate in partitions(image, timeout=timeout):
        if candidate.number == partition:
            return candidate.offset, candidate.size
    raise HandlerUnavailable(f"the image has no partition {partition}")
