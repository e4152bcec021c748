"""NoCloud seed tokens, IO-free: how a seed is kept, and the token its URL carries.

A seed is a random nonce and an expiry, kept in the server's system metadata (one key,
``nocloud_seed``, in the cell database: no table of its own). Its token is the server's uuid
(16 bytes) and ``HMAC-SHA256([metadata] nocloud_seed_secret, uuid, nonce, expiry)`` (32
bytes), base64url without padding: 64 characters. So the compute API shows the same URL at
every GET without storing it, the metadata listener finds the server from the token alone (its
uuid, a lookup in the guest cache) and checks the MAC with ``hmac.compare_digest``, a copy of
the database is not enough to make a URL while the secret is set, and a rotate (a new nonce)
or a revoke (no nonce) ends every URL made before.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import uuid as uuids
from dataclasses import dataclass

# The system metadata key a seed is kept under: "1:<nonce>:<expiry>" or REVOKED.
SYSTEM_METADATA_KEY = "nocloud_seed"
REVOKED = "revoked"
_STORED = re.compile(r"1:(?P<nonce>[0-9a-f]{32}):(?P<expires>[0-9]{1,12}|-)")

TOKEN_LENGTH = 64  # base64url of 16 + 32 bytes
_TOKEN = re.compile(r"[A-Za-z0-9_-]{64}")
_CONTEXT = b"cloudseed nocloud seed 1"


@dataclass(frozen=True, slots=True)
class Seed:
    nonce: str  # 32 hex digits
    expires_at: int | None  # POSIX seconds from which the URL no longer works; None: never

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def stored(self) -> str:
        return f"1:{self.nonce}:{'-' if self.expires_at is None else self.expires_at}"


def new_seed(now: float, lifetime: int) -> Seed:
    """A fresh seed (a new nonce) that works for ``lifetime`` seconds from ``now`` (0: always)."""
    return Seed(secrets.token_hex(16), int(now) + lifetime if lifetime else None)


def parse_stored(value: str | None) -> Seed | None:
    """The seed a system metadata value keeps; None for none, revoked, or anything else."""
    if value is None:
        return None
    match = _STORED.fullmatch(value)
    if match is None:
        return None
    expires = match["expires"]
    return Seed(match["nonce"], None if expires == "-" else int(expires))


def _mac(key: bytes, uuid: uuids.UUID, seed: Seed) -> bytes:
    message = b"\0".join(
        (_CONTEXT, uuid.bytes, seed.nonce.encode(), str(seed.expires_at or 0).encode())
    )
    return hmac.new(key, message, hashlib.sha256).digest()


def token(key: bytes, server: str, seed: Seed) -> str:
    """The token of ``seed`` for server ``server`` (its uuid)."""
    uuid = uuids.UUID(server)
    return base64.urlsafe_b64encode(uuid.bytes + _mac(key, uuid, seed)).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class Presented:
    """A token as a request presents it: the server it names and the MAC it carries."""

    server: str
    mac: bytes


def read_token(text: str) -> Presented | None:
    """What ``text`` claims, or None when it is not a token's shape (no lookup is made then)."""
    if _TOKEN.fullmatch(text) is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern admits only these
        return None
    return Presented(str(uuids.UUID(bytes=raw[:16])), raw[16:])


def valid(key: bytes, presented: Presented, seed: Seed | None, now: float) -> bool:
    """Whether ``presented`` is the live token of the server's ``seed``. The MAC is compared
    in constant time, and compared whatever else is wrong, so timing tells nothing of which."""
    if seed is None:
        seed = Seed("0" * 32, 0)  # compared all the same, never valid
        usable = False
    else:
        usable = not seed.expired(now)
    matches = hmac.compare_digest(_mac(key, uuids.UUID(presented.server), seed), presented.mac)
    return matches and usable


def seed_url(base: str, token_text: str) -> str:
    """The URL cloud-init's ``seedfrom`` takes: it appends ``meta-data`` and the rest."""
    return f"{base}{token_text}/"


def kernel_cmdline(url: str) -> str:
    """The kernel command line (or SMBIOS serial) argument for cloud-init 24.1 and later;
    earlier releases need ``ds=nocloud-net;s=URL`` (docs/metadata.md)."""
    return f"ds=nocloud;s={url}"
