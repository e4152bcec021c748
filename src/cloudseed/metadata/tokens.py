"""Session tokens (EC2's IMDSv2): ``PUT /latest/api/token`` gives a token bound to the calling
instance for 1-21600 seconds; later requests prove they came from a process that could PUT.

Tokens are stateless (expiry + HMAC of instance and expiry under the workers' shared key), so
every worker checks every token and nothing is stored. A PUT that carries X-Forwarded-For is
refused: an open proxy in the guest could otherwise fetch tokens on someone's behalf.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
import time

from cloudseed.errors import InvalidInput
from cloudseed.metadata.errors import TokenRequired
from cloudseed.settings import Secret, Settings

MAX_TTL = 21600
TTL_HEADER = b"x-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = b"x-aws-ec2-metadata-token"
# Exactly what issue() writes: no sign, no leading zero, no underscore, no space, lower hex.
TOKEN = re.compile(rb"v1\.([1-9][0-9]{0,15})\.([0-9a-f]{40})")


class Tokens:
    def __init__(self, secret: str) -> None:
        # serve.run() fills in a shared key before forking; a random one here only serves a
        # single embedded app (tests).
        self._key = secret.encode() if secret else secrets.token_bytes(32)
        self._keyed = hmac.new(self._key, digestmod=hashlib.sha256)  # copied per use

    def issue(self, instance_uuid: str, ttl_header: bytes | None) -> tuple[str, int]:
        try:
            ttl = int(ttl_header or b"")
        except ValueError:
            ttl = 0
        if not 1 <= ttl <= MAX_TTL:
            raise InvalidInput(f"{TTL_HEADER.decode()} must be between 1 and {MAX_TTL}.")
        expires = int(time.time()) + ttl
        return f"v1.{expires}.{self._mac(instance_uuid, expires)}", ttl

    def check(self, instance_uuid: str, token: bytes) -> None:
        # Strict: int() would take "+1", "01" or "1_0" for the same expiry, so a rewritten
        # token would validate. Only the canonical form is ever issued, so only it passes.
        match = TOKEN.fullmatch(token)
        if match is None:
            raise TokenRequired("The session token is not valid.")
        expires = int(match[1])
        if expires < time.time():
            raise TokenRequired("The session token has expired or is not valid.")
        if not hmac.compare_digest(match[2].decode(), self._mac(instance_uuid, expires)):
            raise TokenRequired("The session token is not valid.")

    def _mac(self, instance_uuid: str, expires: int) -> str:
        mac = self._keyed.copy()
        mac.update(f"{instance_uuid}.{expires}".encode())
        return mac.hexdigest()[:40]


def with_shared_key(settings: Settings) -> Settings:
    """``settings`` with a token key every worker shares: the configured one, or one made now
    (call before forking workers)."""
    if settings.metadata.token_secret:
        return settings
    metadata = dataclasses.replace(settings.metadata, token_secret=Secret(secrets.token_hex(32)))
    return dataclasses.replace(settings, metadata=metadata)
