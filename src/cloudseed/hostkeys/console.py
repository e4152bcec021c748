"""The host keys cloud-init prints to the console. IO-free.

At the end of the first boot cloud-init's ``keys_to_console`` module (unless
``ssh: {emit_keys_to_console: false}``) runs ``write-ssh-key-fingerprints``, whose output it
writes to ``/dev/console`` as it is. After the fingerprints (which go through ``logger -s`` and
look like ``<14>Nov 25 10:00:00 cloud-init: 256 SHA256:...``), it prints every
``/etc/ssh/ssh_host_*key.pub`` file (DSA left out by default) between two marker lines::

    -----BEGIN SSH HOST KEY KEYS-----
    ecdsa-sha2-nistp256 AAAAE2VjZHNh... root@vm1
    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5... root@vm1
    ssh-rsa AAAAB3NzaC1yc2E... root@vm1
    -----END SSH HOST KEY KEYS-----

A serial console log has ``\\r\\n`` line ends, and kernel messages (``[   12.345678] ...``) may
land between any two lines. So: the markers must be whole lines; inside a block, blank lines
and kernel messages are skipped, and every other line must be a valid host key, or the whole
block is refused (a block is all or nothing). Lines with a prefix, such as the
``cloud-init[123]: `` of cloud-init's output passed through the journal when ``/dev/console``
cannot be written, are not taken: anything in the guest can send such lines to the journal
(``logger -t cloud-init``), while writing the console itself takes root.
"""

from __future__ import annotations

import re

from cloudseed.hostkeys.errors import InvalidReport
from cloudseed.hostkeys.key_lines import HostKey, parse_host_key

BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
END = "-----END SSH HOST KEY KEYS-----"
MAX_KEYS = 16  # more lines than any host has keys: not a block cloud-init printed

_KERNEL_MESSAGE = re.compile(r"\[\s*\d+\.\d+\] ")
# What a terminal shows nothing of: escape sequences (colours, cursor moves) and the other
# control characters, which serial consoles are full of.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")


def host_key_blocks(text: str) -> list[tuple[HostKey, ...]]:
    """Every complete, valid block of ``text``, oldest first."""
    if END not in text:  # the common case, a console without one: no splitting at all
        return []
    blocks: list[tuple[HostKey, ...]] = []
    current: list[HostKey] | None = None  # inside a block; None: outside, or refused
    inside = False
    for raw in text.split("\n"):
        line = _ESCAPES.sub("", raw).strip()
        if line == BEGIN:
            inside, current = True, []
            continue
        if not inside:
            continue
        if line == END:
            if current:
                blocks.append(tuple(current))
            inside, current = False, None
            continue
        if current is None or not line or _KERNEL_MESSAGE.match(line):
            continue
        try:
            current.append(parse_host_key(line))
        except InvalidReport:
            current = None  # not what cloud-init prints: the block is refused
            continue
        if len(current) > MAX_KEYS:
            current = None
    return blocks


def last_block(text: str) -> tuple[HostKey, ...] | None:
    """The keys of the last complete block of ``text``: the newest cloud-init printed."""
    blocks = host_key_blocks(text)
    return blocks[-1] if blocks else None
