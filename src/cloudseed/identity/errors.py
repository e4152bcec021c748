"""What signed identity refuses or cannot do, in the root error families.

InvalidInput ─────── BadAudience          identity_token's audience is missing or not valid (400)
Conflict ─────────── RotationConflict     another rotation committed first             (409)
ServiceUnavailable ─ KeyUnreadable        a private key cannot be decrypted: the
                                          [identity] key_encryption_secret is missing
                                          or not the one it was stored with           (503)
"""

from __future__ import annotations

from cloudseed.errors import Conflict, InvalidInput, ServiceUnavailable


class BadAudience(InvalidInput):
    pass


class RotationConflict(Conflict):
    def __init__(self) -> None:
        super().__init__("Another rotation of the identity keys happened at the same time.")


class KeyUnreadable(ServiceUnavailable):
    def __init__(self, kid: str) -> None:
        super().__init__(
            f"The identity signing key {kid} cannot be read: [identity] "
            "key_encryption_secret is missing or is not the one it was stored with."
        )
        self.kid = kid
