"""The host key block cloud-init prints to the console, from real output.

``samples/debian12-cloud-init-22.4-first-boot.log`` is the whole serial console of the first
boot of the e2e guest image (``make image-debian``: Debian 12, cloud-init 22.4.2, one Ed25519
host key) under QEMU, with a config drive: GRUB's escape sequences, kernel messages, ``\\r\\n``
line ends, the fingerprints cloud-init logs through ``logger -s``, then the key block.
``samples/write-ssh-key-fingerprints-three-keys.txt`` is what cloud-init's helper
(``/usr/lib/cloud-init/write-ssh-key-fingerprints``, 22.4.2) printed on a Debian 12 host with
``ssh-keygen -A``'s three keys, whose fingerprints (``ssh-keygen -l``) are below.
"""

from __future__ import annotations

import re
from pathlib import Path

from cloudseed.hostkeys.console import BEGIN, END, MAX_KEYS, host_key_blocks, last_block
from cloudseed.hostkeys.key_lines import parse_host_key
from tests.support import keys

SAMPLES = Path(__file__).parent / "samples"
FIRST_BOOT = (SAMPLES / "debian12-cloud-init-22.4-first-boot.log").read_bytes()
THREE_KEYS = (SAMPLES / "write-ssh-key-fingerprints-three-keys.txt").read_text()
THREE_FINGERPRINTS = [
    ("ecdsa-sha2-nistp256", "SHA256:RA5K5NF5HEefH9fMiSoiFKvJIU0JoSpZq0q98AO+W0c"),
    ("ssh-ed25519", "SHA256:sZDnzC1vamxrZOfNvp7cOWw2XmgjIoMbPdFyxc9iJe8"),
    ("ssh-rsa", "SHA256:lMIoG0A85YdIo7a4fG6su4UOJnLXOOfxif11p5puOwI"),
]


def test_a_real_first_boot() -> None:
    # As the qemu driver's console_output decodes the log.
    text = FIRST_BOOT.decode("utf-8", errors="replace")
    (block,) = host_key_blocks(text)
    (key,) = block
    assert key.type == "ssh-ed25519"
    # The guest's own ssh-keygen printed the fingerprint just before the block.
    printed = re.findall(r"cloud-init: 256 (SHA256:\S+) root@vm1 \(ED25519\)", text)
    assert printed == [key.fingerprint_sha256]
    assert last_block(text) == block


def test_the_helper_with_three_keys() -> None:
    block = last_block(THREE_KEYS)
    assert block is not None
    assert [(k.type, k.fingerprint_sha256) for k in block] == THREE_FINGERPRINTS


def test_a_console_without_a_block() -> None:
    assert host_key_blocks("") == []
    assert last_block("login: \r\n") is None
    assert host_key_blocks(BEGIN + "\r\n" + keys.ed25519_public() + "\r\n") == []  # cut off


def block(*lines: str) -> str:
    return "\r\n".join((BEGIN, *lines, END)) + "\r\n"


ED, EC = keys.ed25519_public("root@vm"), keys.ecdsa_public()


def test_kernel_messages_blank_lines_and_escapes_between_lines() -> None:
    text = block("\x1b[0m" + ED, "", "[  153.123456] random: crng init done", EC + "\r\r")
    assert last_block(text) == (parse_host_key(ED), parse_host_key(EC))


def test_the_last_block_is_the_newest() -> None:
    other = keys.ed25519_public()
    text = block(ED) + "[    0.000000] Linux version 6.1\r\n" + block(other)
    assert [b[0].key for b in host_key_blocks(text)] == [
        parse_host_key(ED).key,
        parse_host_key(other).key,
    ]
    assert last_block(text) == (parse_host_key(other),)
    # A block begun again before its end: only the second beginning counts.
    assert last_block(BEGIN + "\r\n" + ED + "\r\n" + block(EC)) == (parse_host_key(EC),)


def test_a_block_is_all_or_nothing() -> None:
    good = block(ED)
    for bad in (
        block(ED, "not a key"),
        block(ED, "ssh-ed25519 AAAA"),
        block("ssh-ed25519-cert-v01@openssh.com " + ED.split()[1]),
        block(*[keys.ed25519_public() for _ in range(MAX_KEYS + 1)]),
        block(),
        block("\ufffd" + ED),  # what undecodable bytes become
    ):
        assert host_key_blocks(bad) == []
        assert last_block(good + bad) == (parse_host_key(ED),)


def test_prefixed_lines_are_not_taken() -> None:
    """What anything in the guest can send through the journal (``logger -t cloud-init``)."""
    prefixed = "\r\n".join(f"[   42.000000] cloud-init[512]: {line}" for line in (BEGIN, ED, END))
    assert host_key_blocks(prefixed) == []
    assert host_key_blocks(f"cloud-init: {BEGIN}\r\n{ED}\r\ncloud-init: {END}\r\n") == []
    assert host_key_blocks(f"x{BEGIN}\r\n{ED}\r\n{END}\r\n") == []
