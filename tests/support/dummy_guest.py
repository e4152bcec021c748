"""A guest kernel of a few bytes, so the qemu driver's tests run a real QEMU process without
booting an operating system.

It is a Multiboot kernel, which QEMU's ``-kernel`` loads directly: it writes ``BANNER`` to the
first serial port, then halts with interrupts off (or, ``loop=True``, writes it again and again,
a guest filling its console log). A halted TCG guest costs no CPU, and it never
answers the ACPI power button, which is what the "switch off after the timeout" paths need.
"""

from __future__ import annotations

import struct
from pathlib import Path

BANNER = b"cloudseed dummy guest up\n"
LOAD_ADDRESS = 0x100000  # 1 MiB, where Multiboot kernels usually go
MAGIC = 0x1BADB002
FLAGS = 0x00010000  # the addresses are in the header ("a.out kludge"): no ELF needed
HEADER_SIZE = 32


def _code(message_address: int, *, loop: bool = False) -> bytes:
    # 32-bit protected mode, flat segments (Multiboot's promise):
    end = (
        [b"\xeb\xed", b"\x90\x90"]  # done: jmp start (offset 0); nop; nop (same size)
        if loop
        else [
            b"\xfa",  # done: cli
            b"\xf4",  # hlt
            b"\xeb\xfc",  # jmp done
        ]
    )
    return b"".join(
        [
            b"\xbe" + struct.pack("<I", message_address),  # start: mov esi, message
            b"\x66\xba\xf8\x03",  # mov dx, 0x3f8 (COM1)
            b"\xac",  # next: lodsb
            b"\x84\xc0",  # test al, al
            b"\x74\x03",  # jz done
            b"\xee",  # out dx, al
            b"\xeb\xf8",  # jmp next
            *end,
        ]
    )


def kernel_bytes(*, loop: bool = False) -> bytes:
    entry = LOAD_ADDRESS + HEADER_SIZE
    code_size = len(_code(0, loop=loop))
    message = BANNER + b"\0"
    header = struct.pack(
        "<8I",
        MAGIC,
        FLAGS,
        (-(MAGIC + FLAGS)) & 0xFFFFFFFF,
        LOAD_ADDRESS,
        LOAD_ADDRESS,
        0,
        0,
        entry,
    )
    body = header + _code(entry + code_size, loop=loop) + message
    return body.ljust(8192, b"\0")  # QEMU reads an 8 KiB header block


def write_kernel(path: Path, *, loop: bool = False) -> Path:
    path.write_bytes(kernel_bytes(loop=loop))
    return path
