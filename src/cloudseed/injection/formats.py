"""Recognise disk image formats by their first bytes. No IO.

``qemu-img info -f raw`` reports "raw" for any file, a qcow2 included, because an explicit
format is never second-guessed. So an image declared raw is also checked here: if its header is
another format's, treating it as raw would hand the guest a qcow2 structure to rewrite (and,
booted as qcow2 later, a backing file of its choosing).
"""

from __future__ import annotations

# How many leading bytes ``detect`` needs.
HEADER_BYTES = 512

# (format, offset, magic) for the formats qemu can open whose header is at the start.
SIGNATURES: tuple[tuple[str, int, bytes], ...] = (
    ("qcow2", 0, b"QFI\xfb"),  # qcow version 1 has the same magic
    ("qed", 0, b"QED\x00"),
    ("vmdk", 0, b"KDMV"),
    ("vmdk", 0, b"# Disk DescriptorFile"),
    ("vhdx", 0, b"vhdxfile"),
    ("vpc", 0, b"conectix"),
    ("vdi", 0x40, b"\x7f\x10\xda\xbe"),
    ("luks", 0, b"LUKS\xba\xbe"),
    ("parallels", 0, b"WithoutFreeSpace"),
    ("parallels", 0, b"WithouFreSpacExt"),
    ("cloop", 0, b"#!/bin/sh\n#V2.0 Format"),
)


def detect(header: bytes) -> str | None:
    """The image format whose signature ``header`` starts with, or None (raw data)."""
    for name, offset, magic in SIGNATURES:
        if header[offset : offset + len(magic)] == magic:
            return name
    return None
