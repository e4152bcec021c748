"""The image writers and readers, in memory: what goes in comes back out, and the FAT image
grows when the content needs more than Nova's 64 MiB."""

from __future__ import annotations

import io

import pytest

from cloudseed.configdrive import iso9660, vfat, vfat_reader
from cloudseed.configdrive.errors import UnreadableDrive
from cloudseed.configdrive.service import render_to_bytes, sniff_format

TREE = {
    "openstack/latest/meta_data.json": b'{"uuid": "u"}',
    "openstack/2012-08-10/meta_data.json": b"{}",
    "openstack/content/0000": b"",
    "openstack/content/0001": b"x" * 5000,
    "ec2/latest/meta-data.json": b"{}",
    "A Long Name With Spaces And.Many.Dots.txt": "é and ü".encode(),
    "UPPER.TXT": b"plain 8.3",
}


@pytest.mark.parametrize(("fmt", "reader"), [("iso9660", iso9660), ("vfat", vfat_reader)])
def test_round_trip(fmt: str, reader: object) -> None:
    image = io.BytesIO(render_to_bytes(TREE, fmt))
    assert sniff_format(image) == fmt
    assert reader.read(image) == TREE  # type: ignore[attr-defined]
    assert reader.label(image) == "config-2"  # type: ignore[attr-defined]


def test_vfat_is_64_mib_and_grows_when_needed() -> None:
    assert len(render_to_bytes(TREE, "vfat")) == 64 * 1024 * 1024
    big = {"openstack/content/0002": b"\x01" * (70 * 1024 * 1024), **TREE}
    image = render_to_bytes(big, "vfat")
    assert len(image) > 70 * 1024 * 1024 and len(image) % (1024 * 1024) == 0
    assert vfat_reader.read(io.BytesIO(image)) == big


def test_vfat_short_names_unique() -> None:
    tree = {f"openstack/2012-08-{day:02d}/meta_data.json": b"{}" for day in range(1, 25)}
    assert vfat_reader.read(io.BytesIO(render_to_bytes(tree, "vfat"))) == tree


def test_vfat_geometry_is_fat16() -> None:
    geo = vfat.geometry(vfat.DEFAULT_SIZE, 4)
    assert vfat.FAT16_MIN_CLUSTERS <= geo.clusters <= vfat.FAT16_MAX_CLUSTERS
    assert geo.fat_sectors * vfat.SECTOR // 2 >= geo.clusters + 2


@pytest.mark.parametrize("junk", [b"", b"\0" * 70000, b"\x55\xaa" * 40000])
def test_not_an_image(junk: bytes) -> None:
    with pytest.raises(UnreadableDrive):
        sniff_format(io.BytesIO(junk))
        vfat_reader.read(io.BytesIO(junk))
