"""NoCloud seed errors, in the root families (statuses from the one table, ``web/faults.py``).

NotFound ─── SeedRevoked     the server's seed was revoked; a rotate makes a new one (404)
SeedRaced (internal): a concurrent request made the server's first seed; run again.
"""

from __future__ import annotations

from cloudseed.errors import NotFound


class SeedRevoked(NotFound):
    def __init__(self, uuid: str) -> None:
        super().__init__(
            f'Server {uuid} has no NoCloud seed: it was revoked. POST {{"rotate": null}} to '
            f"/servers/{uuid}/nocloud-seed/action makes a new one."
        )
        self.uuid = uuid


class SeedRaced(Exception):
    """Internal: two requests made a server's first seed at once; the loser runs again (and
    finds the winner's)."""
