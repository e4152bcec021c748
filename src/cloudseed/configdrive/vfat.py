"""VFAT config drives: a FAT16 filesystem with long names, label ``config-2``, written in one
pass with no tool, no root, no loop device and no mount.

Why our own writer: the Python FAT libraries we tried create files one at a time with a
directory search and a FAT flush each (pyfatfs needs about 20 s for a drive of 1,000 files),
and mkfs.vfat + mcopy need a temporary tree and subprocesses. A config drive is written once
and never changed, so the whole layout is known up front: directories and files get
consecutive clusters, the FAT is a list of straight chains, and the image is written front to
back. ``fsck.vfat -n`` and mtools read every image back in the tests.

Geometry: Nova's drives are 64 MiB; ours are too, grown in whole MiB (and with larger clusters
once FAT16's cluster limit is reached) when the content needs more. The file is sparse: only
the metadata regions and the clusters in use are written.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

from cloudseed.configdrive.contents import directories

LABEL = "config-2"
DEFAULT_SIZE = 64 * 1024 * 1024
SECTOR = 512
ROOT_ENTRIES = 512
RESERVED_SECTORS = 1
FATS = 2
FAT16_MIN_CLUSTERS = 4085
FAT16_MAX_CLUSTERS = 65524
MAX_CLUSTER_SECTORS = 64  # 32 KiB clusters: FAT16 stops near 2 GiB
ENTRY = 32
ATTR_DIRECTORY, ATTR_ARCHIVE, ATTR_VOLUME, ATTR_LFN = 0x10, 0x20, 0x08, 0x0F
END_OF_CHAIN = 0xFFFF
_SHORT_CHARS = re.compile(r"[^A-Z0-9!#$%&'()@^_`{}~-]")
LFN_CHARS = 13


def short_checksum(short: bytes) -> int:
    """The checksum a long-name entry carries of its short entry (11 bytes)."""
    total = 0
    for byte in short:
        total = (((total & 1) << 7) + (total >> 1) + byte) & 0xFF
    return total


def _dos_datetime(when: dt.datetime) -> tuple[int, int]:
    date = ((max(when.year, 1980) - 1980) << 9) | (when.month << 5) | when.day
    time = (when.hour << 11) | (when.minute << 5) | (when.second // 2)
    return date, time


@dataclass
class _Node:
    name: str
    path: str
    is_dir: bool
    content: bytes = b""
    children: list[_Node] = field(default_factory=list)
    entries: list[bytes] = field(default_factory=list)  # this node's entries in its parent
    short: bytes = b""
    cluster: int = 0
    clusters: int = 0


@dataclass(frozen=True)
class Geometry:
    total_sectors: int
    cluster_sectors: int
    fat_sectors: int

    @property
    def cluster_size(self) -> int:
        return self.cluster_sectors * SECTOR

    @property
    def root_sector(self) -> int:
        return RESERVED_SECTORS + FATS * self.fat_sectors

    @property
    def data_sector(self) -> int:
        return self.root_sector + ROOT_ENTRIES * ENTRY // SECTOR

    @property
    def clusters(self) -> int:
        return (self.total_sectors - self.data_sector) // self.cluster_sectors


def geometry(size: int, cluster_sectors: int) -> Geometry:
    """FAT16 geometry for an image of ``size`` bytes with clusters of ``cluster_sectors``."""
    total = size // SECTOR
    fat_sectors = 1
    while True:  # the FAT must describe every cluster it leaves room for
        data = total - RESERVED_SECTORS - FATS * fat_sectors - ROOT_ENTRIES * ENTRY // SECTOR
        needed = math.ceil((data // cluster_sectors + 2) * 2 / SECTOR)
        if needed <= fat_sectors:
            return Geometry(total, cluster_sectors, fat_sectors)
        fat_sectors = needed


def write(
    tree: Mapping[str, bytes],
    out: BinaryIO,
    *,
    size: int = DEFAULT_SIZE,
    when: dt.datetime | None = None,
    volume_id: int = 0x0C0F16D2,
    label: str = LABEL,
) -> int:
    """Write a VFAT image of ``tree`` (path -> bytes) to ``out``, labelled ``label`` (at most
    11 characters); returns the image size."""
    volume_label = label.ljust(11).encode("ascii")
    if len(volume_label) > 11:
        raise ValueError("a FAT volume label has at most 11 characters")
    date, time = _dos_datetime(when or dt.datetime.now(dt.UTC))
    root = _build_nodes(tree)
    _name_children(root, date, time)
    cluster_sectors = 4
    size = max(size, DEFAULT_SIZE)
    while True:
        geo = geometry(size, cluster_sectors)
        needed = _count_clusters(root, geo.cluster_size)
        if geo.clusters > FAT16_MAX_CLUSTERS:
            if cluster_sectors >= MAX_CLUSTER_SECTORS:
                raise ValueError("config drive content too large for FAT16")
            cluster_sectors *= 2
            continue
        if needed <= geo.clusters and geo.clusters >= FAT16_MIN_CLUSTERS:
            break
        # Grow by what is missing (and a MiB more), rounded to whole MiB.
        missing = (needed - geo.clusters) * geo.cluster_size + 1024 * 1024
        size = math.ceil((size + missing) / (1024 * 1024)) * 1024 * 1024
    if len(root.children) + 1 > ROOT_ENTRIES:  # pragma: no cover - drives have two
        raise ValueError("too many entries in the root directory")
    fat = [0xFFF8, END_OF_CHAIN]
    order = _allocate(root, fat)
    _write_image(out, geo, root, order, fat, date, time, volume_id, volume_label)
    return geo.total_sectors * SECTOR


def _build_nodes(tree: Mapping[str, bytes]) -> _Node:
    root = _Node("", "", True)
    nodes = {"": root}
    for directory in directories(tree):
        parent, _, name = directory.rpartition("/")
        node = _Node(name, directory, True)
        nodes[parent].children.append(node)
        nodes[directory] = node
    for path, content in tree.items():
        parent, _, name = path.rpartition("/")
        nodes[parent].children.append(_Node(name, path, False, content))
    return root


def _short_basis(name: str) -> tuple[str, str, bool]:
    """(base, extension, exact): the 8.3 basis of a long name; exact when the long name is
    that short name already (then no long-name entries are needed)."""
    upper = name.upper()
    stem, _dot, ext = upper.rpartition(".") if "." in upper.lstrip(".") else (upper, "", "")
    base = _SHORT_CHARS.sub("_", stem.replace(" ", "").lstrip("."))
    extension = _SHORT_CHARS.sub("_", ext.replace(" ", ""))
    exact = (
        name == upper
        and base == stem
        and extension == ext
        and 0 < len(base) <= 8
        and len(extension) <= 3
        and name.count(".") <= 1
    )
    return base or "_", extension, exact


def _name_children(directory: _Node, date: int, time: int) -> None:
    taken: set[bytes] = set()
    for child in directory.children:
        base, ext, exact = _short_basis(child.name)
        if exact:
            short = base.ljust(8).encode() + ext.ljust(3).encode()
        else:
            n = 1
            while True:
                tail = f"~{n}"
                short = (base[: 8 - len(tail)] + tail).ljust(8).encode() + ext[:3].ljust(3).encode()
                if short not in taken:
                    break
                n += 1
        taken.add(short)
        child.short = short
        child.entries = [] if exact else _long_entries(child.name, short_checksum(short))
        if child.is_dir:
            _name_children(child, date, time)


def _long_entries(name: str, checksum: int) -> list[bytes]:
    units = name.encode("utf-16-le")
    chars = [units[i : i + 2] for i in range(0, len(units), 2)]
    if len(chars) % LFN_CHARS:
        chars.append(b"\0\0")
    while len(chars) % LFN_CHARS:
        chars.append(b"\xff\xff")
    count = len(chars) // LFN_CHARS
    entries = []
    for index in range(count, 0, -1):  # the last part first, as the format wants
        part = chars[(index - 1) * LFN_CHARS : index * LFN_CHARS]
        seq = index | (0x40 if index == count else 0)
        entries.append(
            bytes([seq])
            + b"".join(part[:5])
            + bytes([ATTR_LFN, 0, checksum])
            + b"".join(part[5:11])
            + b"\0\0"
            + b"".join(part[11:13])
        )
    return entries


def _entry_count(directory: _Node) -> int:
    return 2 + sum(len(child.entries) + 1 for child in directory.children)


def _count_clusters(root: _Node, cluster_size: int) -> int:
    total = 0
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            if child.is_dir:
                child.clusters = max(1, math.ceil(_entry_count(child) * ENTRY / cluster_size))
                stack.append(child)
            else:
                child.clusters = math.ceil(len(child.content) / cluster_size)
            total += child.clusters
    return total


def _allocate(root: _Node, fat: list[int]) -> list[_Node]:
    """Consecutive clusters, directories first (breadth first), then files; the FAT gets one
    straight chain per node. Returns the nodes in cluster order."""
    dirs: list[_Node] = []
    files: list[_Node] = []
    queue = [root]
    while queue:
        node = queue.pop(0)
        for child in node.children:
            (dirs if child.is_dir else files).append(child)
            if child.is_dir:
                queue.append(child)
    order = [n for n in (*dirs, *files) if n.clusters]
    for node in order:
        node.cluster = len(fat)
        fat.extend(range(node.cluster + 1, node.cluster + node.clusters))
        fat.append(END_OF_CHAIN)
    return order


def _short_entry(short: bytes, attr: int, cluster: int, size: int, date: int, time: int) -> bytes:
    return struct.pack(
        "<11sBBBHHHHHHHI", short, attr, 0, 0, time, date, date, 0, time, date, cluster, size
    )


def _directory_bytes(
    node: _Node, parent_cluster: int, date: int, time: int, volume_label: bytes = b""
) -> bytes:
    entries: list[bytes] = []
    if node.path:
        entries.append(_short_entry(b".          ", ATTR_DIRECTORY, node.cluster, 0, date, time))
        entries.append(_short_entry(b"..         ", ATTR_DIRECTORY, parent_cluster, 0, date, time))
    else:
        entries.append(_short_entry(volume_label, ATTR_VOLUME, 0, 0, date, time))
    for child in node.children:
        entries.extend(child.entries)
        entries.append(
            _short_entry(
                child.short,
                ATTR_DIRECTORY if child.is_dir else ATTR_ARCHIVE,
                child.cluster,
                0 if child.is_dir else len(child.content),
                date,
                time,
            )
        )
    return b"".join(entries)


def _write_image(
    out: BinaryIO,
    geo: Geometry,
    root: _Node,
    order: list[_Node],
    fat: list[int],
    date: int,
    time: int,
    volume_id: int,
    volume_label: bytes,
) -> None:
    header = bytearray(geo.data_sector * SECTOR)
    header[0:SECTOR] = _boot_sector(geo, volume_id, volume_label)
    table = struct.pack(f"<{len(fat)}H", *fat)
    for copy in range(FATS):
        start = (RESERVED_SECTORS + copy * geo.fat_sectors) * SECTOR
        header[start : start + len(table)] = table
    root_bytes = _directory_bytes(root, 0, date, time, volume_label)
    start = geo.root_sector * SECTOR
    header[start : start + len(root_bytes)] = root_bytes
    out.write(header)
    parents = {
        child.path: node.cluster
        for node in [root, *order]
        if node.is_dir
        for child in node.children
    }
    for node in order:
        data = (
            _directory_bytes(node, parents[node.path], date, time) if node.is_dir else node.content
        )
        out.write(data)
        pad = node.clusters * geo.cluster_size - len(data)
        out.write(b"\0" * pad)
    # The rest is free space: extend without writing (a sparse file on disk).
    end = geo.total_sectors * SECTOR
    if out.tell() < end:
        out.seek(end - 1)
        out.write(b"\0")


def _boot_sector(geo: Geometry, volume_id: int, volume_label: bytes) -> bytes:
    small = geo.total_sectors if geo.total_sectors < 0x10000 else 0
    large = 0 if small else geo.total_sectors
    sector = struct.pack(
        "<3s8sHBHBHHBHHHII BBBI11s8s",
        b"\xeb\x3c\x90",
        b"cloudsd ",
        SECTOR,
        geo.cluster_sectors,
        RESERVED_SECTORS,
        FATS,
        ROOT_ENTRIES,
        small,
        0xF8,
        geo.fat_sectors,
        32,
        64,
        0,
        large,
        0x80,
        0,
        0x29,
        volume_id,
        volume_label,
        b"FAT16   ",
    )
    # Not bootable: a tiny loop in place of boot code, and the signature.
    sector += b"\xf4\xeb\xfd"
    return sector.ljust(SECTOR - 2, b"\0") + b"\x55\xaa"
