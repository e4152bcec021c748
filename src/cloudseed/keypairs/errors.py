"""Key pair errors; messages are Nova's, word for word, because clients and
tempest compare them.

    InvalidInput ── InvalidKeypair       bad key material or name   (400)
                    MarkerNotFound       ?marker= names no key pair (400)
    NotFound ────── KeypairNotFound                                  (404)
    Conflict ────── KeypairExists        (user_id, name) taken       (409)
    QuotaExceeded ─ KeypairLimitExceeded [quota] key_pairs reached   (403)
"""

from __future__ import annotations

from cloudseed.errors import Conflict, InvalidInput, NotFound, QuotaExceeded


class InvalidKeypair(InvalidInput):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Keypair data is invalid: {reason}")
        self.reason = reason


class KeypairNotFound(NotFound):
    def __init__(self, *, name: str, user_id: str) -> None:
        # Nova's message has no trailing period; keep it identical.
        super().__init__(f"Keypair {name} not found for user {user_id}")
        self.name = name
        self.user_id = user_id


class KeypairExists(Conflict):
    def __init__(self, *, name: str) -> None:
        super().__init__(f"Key pair '{name}' already exists.")
        self.name = name


class KeypairLimitExceeded(QuotaExceeded):
    def __init__(self, *, limit: int) -> None:
        super().__init__("Quota exceeded, too many key pairs.", resource="key_pairs", limit=limit)


class MarkerNotFound(InvalidInput):
    def __init__(self, marker: str) -> None:
        super().__init__(f"Marker {marker} could not be found.")
        self.marker = marker
