"""Reading FAT12/16/32 images with long names, without mounting: for ``cloudseed configdrive
show`` and for carrying a drive's admin password and files over to its replacement.

Reads any FAT drive (one made by Nova's mkfs.vfat too), not only ours; a structure that
points outside the image is reported as UnreadableDrive rather than followed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from cloudseed.configdrive.errors import UnreadableDrive
from cloudseed.configdrive.vfat import ATTR_DIRECTORY, ATTR_LFN, ATTR_VOLUME, short_checksum

MAX_FILES = 100_000  # a loop in a corrupt image must end


@dataclass(frozen=True)
class _Layout:
    sector: int
    cluster_size: int
    fat_offset: int
    root_offset: int  # FAT12/16: the fixed root directory
    root_size: int
    root_cluster: int  # FAT32: the root directory's first cluster
    data_offset: int
    bits: int
    clusters: int
    label: str


def _layout(image: BinaryIO) -> _Layout:
    image.seek(0)
    boot = image.read(512)
    if len(boot) < 512 or boot[510:512] != b"\x55\xaa":
        raise UnreadableDrive("not a FAT image (no boot sector signature)")
    (sector, cluster_sectors, reserved, fats, root_entries, total16, _media, fat16) = (
        struct.unpack_from("<HBHBHHBH", boot, 11)
    )
    total32, fat32 = struct.unpack_from("<II", boot, 32)
    root_cluster: int = struct.unpack_from("<I", boot, 44)[0]
    if sector not in (512, 1024, 2048, 4096) or cluster_sectors == 0 or fats == 0:
        raise UnreadableDrive("not a FAT image (implausible boot sector)")
    fat_sectors = fat16 or fat32
    total = total16 or total32
    root_sectors = (root_entries * 32 + sector - 1) // sector
    data_sector = reserved + fats * fat_sectors + root_sectors
    clusters = (total - data_sector) // cluster_sectors
    bits = 12 if clusters < 4085 else 16 if clusters < 65525 else 32
    label_at = 71 if bits == 32 else 43
    return _Layout(
        sector=sector,
        cluster_size=sector * cluster_sectors,
        fat_offset=reserved * sector,
        root_offset=(reserved + fats * fat_sectors) * sector,
        root_size=root_sectors * sector,
        root_cluster=root_cluster if bits == 32 else 0,
        data_offset=data_sector * sector,
        bits=bits,
        clusters=clusters,
        label=boot[label_at : label_at + 11].decode("ascii", "replace").rstrip(),
    )


class FatImage:
    def __init__(self, image: BinaryIO) -> None:
        self._image = image
        self.layout = _layout(image)
        lay = self.layout
        image.seek(lay.fat_offset)
        self._fat = image.read((lay.clusters + 2) * lay.bits // 8 + 2)

    def _next(self, cluster: int) -> int | None:
        bits = self.layout.bits
        if bits == 16:
            value: int = struct.unpack_from("<H", self._fat, cluster * 2)[0]
            return None if value >= 0xFFF8 else value
        if bits == 32:
            value = struct.unpack_from("<I", self._fat, cluster * 4)[0] & 0x0FFFFFFF
            return None if value >= 0x0FFFFFF8 else value
        pair: int = struct.unpack_from("<H", self._fat, cluster * 3 // 2)[0]
        value = pair >> 4 if cluster & 1 else pair & 0xFFF
        return None if value >= 0xFF8 else value

    def _chain(self, first: int, size: int | None) -> bytes:
        lay = self.layout
        parts: list[bytes] = []
        cluster: int | None = first
        seen = 0
        while cluster is not None and (size is None or seen < size):
            if not 2 <= cluster < lay.clusters + 2 or len(parts) > lay.clusters:
                raise UnreadableDrive(f"cluster chain leaves the image at {cluster}")
            self._image.seek(lay.data_offset + (cluster - 2) * lay.cluster_size)
            parts.append(self._image.read(lay.cluster_size))
            seen += lay.cluster_size
            cluster = self._next(cluster)
        data = b"".join(parts)
        return data if size is None else data[:size]

    def _root(self) -> bytes:
        if self.layout.bits == 32:
            return self._chain(self.layout.root_cluster, None)
        self._image.seek(self.layout.root_offset)
        return self._image.read(self.layout.root_size)

    def volume_label(self) -> str:
        """The root directory's label entry, else the boot sector's."""
        raw = self._root()
        for offset in range(0, len(raw), 32):
            entry = raw[offset : offset + 32]
            if entry[0] == 0:
                break
            if entry[0] != 0xE5 and entry[11] & 0x1F == ATTR_VOLUME:
                return entry[:11].decode("ascii", "replace").rstrip()
        return self.layout.label

    def files(self) -> dict[str, bytes]:
        tree: dict[str, bytes] = {}
        pending: list[tuple[str, bytes]] = [("", self._root())]
        while pending:
            prefix, raw = pending.pop(0)
            for name, attr, cluster, size in _entries(raw):
                path = prefix + name
                if len(tree) + len(pending) > MAX_FILES:
                    raise UnreadableDrive("too many files")
                if attr & ATTR_DIRECTORY:
                    if cluster:
                        pending.append((path + "/", self._chain(cluster, None)))
                else:
                    tree[path] = self._chain(cluster, size) if cluster and size else b""
        return tree


def _entries(raw: bytes) -> list[tuple[str, int, int, int]]:
    found = []
    long_parts: dict[int, str] = {}
    long_sum = -1
    for offset in range(0, len(raw) - 31, 32):
        entry = raw[offset : offset + 32]
        if entry[0] == 0:
            break
        if entry[0] == 0xE5:
            long_parts = {}
            continue
        attr = entry[11]
        if attr == ATTR_LFN:
            units = entry[1:11] + entry[14:26] + entry[28:32]
            text = units.decode("utf-16-le", "replace").split("\0", 1)[0].rstrip("\uffff")
            if entry[0] & 0x40:
                long_parts = {}
            long_parts[entry[0] & 0x1F] = text
            long_sum = entry[13]
            continue
        if attr & ATTR_VOLUME or entry[:2] in (b". ", b".."):
            long_parts = {}
            continue
        short = entry[:11]
        if long_parts and long_sum == short_checksum(short):
            name = "".join(long_parts[k] for k in sorted(long_parts))
        else:
            name = _short_name(short, entry[12])
        long_parts = {}
        hi, lo = struct.unpack_from("<H", entry, 20)[0], struct.unpack_from("<H", entry, 26)[0]
        size: int = struct.unpack_from("<I", entry, 28)[0]
        found.append((name, attr, (hi << 16) | lo, size))
    return found


def _short_name(short: bytes, case: int) -> str:
    base = short[:8].decode("cp437").rstrip()
    ext = short[8:].decode("cp437").rstrip()
    # Windows NT's case bits: base (0x08) or extension (0x10) shown in lower case.
    if case & 0x08:
        base = base.lower()
    if case & 0x10:
        ext = ext.lower()
    return f"{base}.{ext}" if ext else base


def read(image: BinaryIO) -> dict[str, bytes]:
    """Every file of a FAT image, path -> bytes. Raises UnreadableDrive."""
    try:
        return FatImage(image).files()
    except (struct.error, IndexError, KeyError) as exc:
        raise UnreadableDrive(f"broken FAT image: {exc}") from None


def label(image: BinaryIO) -> str:
    return FatImage(image).volume_label()
