"""Image registry errors.

NotFound ── ImageNotFound   no image with this id or name   (404)
"""

from __future__ import annotations

from cloudseed.errors import NotFound


class ImageNotFound(NotFound):
    def __init__(self, image_ref: str) -> None:
        super().__init__(f"Image {image_ref} could not be found.")
