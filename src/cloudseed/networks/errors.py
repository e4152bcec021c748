"""Network registry errors.

NotFound ── NetworkNotFound   no network with this id or name   (404)
"""

from __future__ import annotations

from cloudseed.errors import NotFound


class NetworkNotFound(NotFound):
    def __init__(self, ref: str) -> None:
        super().__init__(f"Network {ref} could not be found.")
