"""Flavor registry errors.

NotFound ── FlavorNotFound   no flavor with this id or name   (404)
"""

from __future__ import annotations

from cloudseed.errors import NotFound


class FlavorNotFound(NotFound):
    def __init__(self, flavor_id: str) -> None:
        super().__init__(f"Flavor {flavor_id} could not be found.")
