"""SSH host public keys: checked, in canonical form, fingerprinted. IO-free.

A host key line is ``TYPE BASE64 [COMMENT]`` (an ``ssh_host_*_key.pub`` file). What cloudseed
keeps of it is ``TYPE BASE64`` only: the comment (``root@hostname``) is the guest's free text
and means nothing to ssh. The checks are stricter than for key pairs (``keypairs/key_material.py``,
which must accept whatever Nova accepted): only the types sshd uses as host keys, base64 exactly as
OpenSSH writes it, and the blob re-read by cryptography, so the fingerprint is of the very key a
client will be told to trust. ``fingerprint_sha256`` is OpenSSH's form (``SHA256:`` and unpadded
base64 of the blob), what ``ssh-keygen -l`` and ssh's own prompts print."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cloudseed.hostkeys.errors import InvalidReport
from cloudseed.keypairs.errors import InvalidKeypair
from cloudseed.keypairs.key_material import parse_public_key

# The key types sshd uses for host keys (``ssh-keygen -A`` makes rsa, ecdsa and ed25519; older
# systems also dsa). Certificates and security-key types are never host keys.
HOST_KEY_TYPES = frozenset(
    {
        "ssh-rsa",
        "ssh-dss",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "ssh-ed25519",
    }
)
# An RSA-16384 public key line is about 2,800 characters; anything much longer is no key.
MAX_LINE = 8192


@dataclass(frozen=True, slots=True)
class HostKey:
    type: str  # "ssh-ed25519", ...
    key: str  # "TYPE BASE64", canonical, without the comment
    fingerprint_sha256: str  # "SHA256:..." as ssh-keygen -l prints it

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "key": self.key, "fingerprint_sha256": self.fingerprint_sha256}

    @classmethod
    def from_dict(cls, value: dict[str, str]) -> HostKey:
        return cls(
            type=value["type"], key=value["key"], fingerprint_sha256=value["fingerprint_sha256"]
        )


def parse_host_key(text: str, *, what: str = "the host key") -> HostKey:
    """The host key of the one line ``text`` (surrounding blanks and a final newline allowed);
    InvalidReport naming ``what`` otherwise."""
    if len(text) > MAX_LINE:
        raise InvalidReport(f"{what} is longer than {MAX_LINE} characters: not a public key.")
    line = text.strip()
    if "\n" in line or "\r" in line:
        raise InvalidReport(f"{what} has more than one line: one public key line is expected.")
    fields = line.split(None, 2)  # TYPE, BASE64, and the comment, which is not kept
    if len(fields) < 2:
        raise InvalidReport(f"{what} is not an SSH public key line (TYPE BASE64 [COMMENT]).")
    key_type, blob_text = fields[0], fields[1]
    if key_type not in HOST_KEY_TYPES:
        shown = key_type if key_type.isascii() and key_type.isprintable() else "(not text)"
        raise InvalidReport(
            f"{what} has key type {shown[:64]!r}, which is no SSH host key type "
            f"({', '.join(sorted(HOST_KEY_TYPES))})."
        )
    if not blob_text.isascii():
        raise InvalidReport(f"{what} is not valid base64.")
    try:
        blob = base64.b64decode(blob_text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidReport(f"{what} is not valid base64.") from None
    canonical = base64.b64encode(blob).decode("ascii")
    if canonical != blob_text:
        raise InvalidReport(f"{what} is not valid base64 (not as OpenSSH writes it).")
    try:
        parsed = parse_public_key(f"{key_type} {canonical}")
    except InvalidKeypair:
        raise InvalidReport(f"{what} is not a valid {key_type} public key.") from None
    return HostKey(
        type=key_type, key=f"{key_type} {canonical}", fingerprint_sha256=parsed.fingerprint_sha256
    )


def same_keys(
    a: tuple[HostKey, ...] | list[HostKey], b: tuple[HostKey, ...] | list[HostKey]
) -> bool:
    """Whether two reports name the same set of keys (order and comments aside)."""
    return sorted(k.key for k in a) == sorted(k.key for k in b)
