"""Where an ISO 9660 image keeps its build times, found by walking the image's own structures
(ECMA-119 with Joliet and Rock Ridge), so a test can say two images are the same byte for byte
but for those. Written from the standards, not from any reader under test."""

from __future__ import annotations

import struct

SECTOR = 2048
_VOLUME_DATES = (813, 830, 847, 864)  # creation, modification, expiration, effective: 17 bytes
_ROOT_RECORD = 156
_RECORD_DATE = 18  # 7 bytes
_TF_LONG_FORM = 0x80


def date_bytes(image: bytes) -> set[int]:
    """The offset of every byte of every date in ``image``: the volume descriptors', each
    directory record's, and Rock Ridge's TF entries'."""
    found: set[int] = set()
    seen: set[int] = set()
    sector = 16
    while True:
        base = sector * SECTOR
        kind = image[base]
        if kind == 255:
            return found
        if kind in (1, 2):  # the primary volume descriptor and Joliet's supplementary one
            for start in _VOLUME_DATES:
                found.update(range(base + start, base + start + 17))
            _record(image, base + _ROOT_RECORD, found)
            extent, size = _extent(image, base + _ROOT_RECORD)
            _directory(image, extent, size, found, seen)
        sector += 1


def _extent(image: bytes, record: int) -> tuple[int, int]:
    extent = struct.unpack_from("<I", image, record + 2)[0]
    size = struct.unpack_from("<I", image, record + 10)[0]
    return extent, size


def _record(image: bytes, at: int, found: set[int]) -> None:
    found.update(range(at + _RECORD_DATE, at + _RECORD_DATE + 7))


def _directory(image: bytes, extent: int, size: int, found: set[int], seen: set[int]) -> None:
    if extent in seen:
        return
    seen.add(extent)
    start = extent * SECTOR
    at = start
    while at < start + size:
        length = image[at]
        if length == 0:  # records never cross a sector: the rest of this one is padding
            at = (at // SECTOR + 1) * SECTOR
            continue
        _record(image, at, found)
        name_length = image[at + 32]
        name = image[at + 33 : at + 33 + name_length]
        system_use = at + 33 + name_length + (1 - name_length % 2)
        _system_use(image, system_use, at + length, found)
        if image[at + 25] & 2 and name not in (b"\x00", b"\x01"):
            child, child_size = _extent(image, at)
            _directory(image, child, child_size, found, seen)
        at += length


def _system_use(image: bytes, at: int, end: int, found: set[int]) -> None:
    """Rock Ridge entries from ``at`` to ``end``, following continuation areas (CE)."""
    while at + 4 <= end:
        signature, length = image[at : at + 2], image[at + 2]
        if length < 4:
            return
        if signature == b"TF":
            flags = image[at + 4]
            width = 17 if flags & _TF_LONG_FORM else 7
            stamps = bin(flags & 0x7F).count("1")
            found.update(range(at + 5, at + 5 + stamps * width))
        elif signature == b"CE":
            block = struct.unpack_from("<I", image, at + 4)[0]
            offset = struct.unpack_from("<I", image, at + 12)[0]
            size = struct.unpack_from("<I", image, at + 20)[0]
            area = block * SECTOR + offset
            _system_use(image, area, area + size, found)
        elif signature == b"ST":
            return
        at += length


def differences(first: bytes, second: bytes) -> list[int]:
    """Offsets where two images of one length differ (compared a sector at a time)."""
    assert len(first) == len(second), (len(first), len(second))
    found: list[int] = []
    for base in range(0, len(first), SECTOR):
        if first[base : base + SECTOR] != second[base : base + SECTOR]:
            found.extend(
                base + i
                for i, (a, b) in enumerate(
                    zip(first[base : base + SECTOR], second[base : base + SECTOR], strict=True)
                )
                if a != b
            )
    return found
