"""Image registry errors.

NotFound ── ImageNotFound                         no image with this id or name      (404)
InvalidInput ── FlavorDiskTooSmall                the flavor cannot hold the image   (400)
                ├── FlavorDiskSmallerThanImage    its root disk < the image's virtual size
                └── FlavorDiskSmallerThanMinDisk  its root disk < the image's min_disk
InvalidInput ── FlavorMemoryTooSmall              its RAM < the image's min_ram       (400)
"""

from __future__ import annotations

from cloudseed.errors import InvalidInput, NotFound

GIB = 1 << 30


class ImageNotFound(NotFound):
    def __init__(self, image_ref: str) -> None:
        super().__init__(f"Image {image_ref} could not be found.")


class FlavorDiskTooSmall(InvalidInput):
    """Nova's messages, sizes in bytes."""


class FlavorDiskSmallerThanImage(FlavorDiskTooSmall):
    def __init__(self, *, flavor_gb: int, image_size: int) -> None:
        super().__init__(
            "Flavor's disk is too small for requested image. Flavor disk is "
            f"{flavor_gb * GIB} bytes, image is {image_size} bytes."
        )


class FlavorDiskSmallerThanMinDisk(FlavorDiskTooSmall):
    def __init__(self, *, flavor_gb: int, min_disk_gb: int) -> None:
        super().__init__(
            "Flavor's disk is smaller than the minimum size specified in image metadata. "
            f"Flavor disk is {flavor_gb * GIB} bytes, minimum size is {min_disk_gb * GIB} bytes."
        )


class FlavorMemoryTooSmall(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Flavor's memory is too small for requested image.")
