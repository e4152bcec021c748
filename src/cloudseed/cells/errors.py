"""Cell errors.

NotFound ── InstanceNotFound   no instance with this uuid in any cell   (404)
"""

from __future__ import annotations

from cloudseed.errors import NotFound


class InstanceNotFound(NotFound):
    def __init__(self, uuid: str) -> None:
        super().__init__(f"Instance {uuid} could not be found.")
        self.uuid = uuid
