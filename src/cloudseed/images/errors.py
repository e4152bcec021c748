"""Image registry errors. The messages of the Glance slice's errors are Glance's.

NotFound ─┬ ImageNotFound                  no image with this id or name      (404)
          └ NoSuchImage                    Glance: none with this id, for you (404)
            └ ImageGoneDuringUpload        deleted while its data arrived     (404)
InvalidInput ─┬ FlavorDiskTooSmall         the flavor cannot hold the image   (400)
              │ ├ FlavorDiskSmallerThanImage    its root disk < the image's virtual size
              │ └ FlavorDiskSmallerThanMinDisk  its root disk < the image's min_disk
              ├ FlavorMemoryTooSmall       its RAM < the image's min_ram      (400)
              ├ ImageNotActive             no data yet (queued or saving)     (400)
              ├ InvalidImage               a create body Glance's schema refuses (400)
              ├ PropertyNameTooLong        an extra property's name > 255     (400)
              ├ NotValidImage              data qemu-img cannot open as its format (400)
              ├ VirtualSizeTooLarge        a virtual size over image_virtual_size_cap (400)
              └ FormatsNotSet              upload before disk/container format (400)
Forbidden ─┬ ReadOnlyAttribute             create sets status, size, ...      (403)
           ├ ReservedAttribute             create sets location, os_glance_*  (403)
           ├ ImageActionForbidden          policy: publicize_image, delete_image, ... (403)
           ├ ForeignOwner                  create for another project         (403)
           └ ProtectedImage                delete of a protected image        (403)
Conflict ─┬ DuplicateImage                 create with an id already taken    (409)
          └ ImageStatusConflict            upload to an image that has data   (409)
TooLarge ── ImageLimitExceeded             upload over image_size_cap, too many properties
                                                                              (413)
ServiceUnavailable ── ImageFetchFailed     a compute agent could not download an image into
                                           its cache (a server's fault, never an API answer)
"""

from __future__ import annotations

from cloudseed.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
    TooLarge,
)

GIB = 1 << 30


class ImageNotFound(NotFound):
    def __init__(self, image_ref: str) -> None:
        super().__init__(f"Image {image_ref} could not be found.")


class NoSuchImage(NotFound):
    """Glance's 404 (``message`` differs by call: show, delete)."""

    def __init__(self, image_id: str, message: str | None = None) -> None:
        super().__init__(message or f"No image found with ID {image_id}")
        self.image_id = image_id


class ImageGoneDuringUpload(NoSuchImage):
    def __init__(self, image_id: str) -> None:
        super().__init__(
            image_id,
            f"Image {image_id} could not be found after upload. The image may have been "
            "deleted during the upload, cleaning up the chunks uploaded.",
        )


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


class ImageNotActive(InvalidInput):
    """Nova's refusal to boot (or rebuild with) an image whose data has not arrived."""

    def __init__(self, image_id: str) -> None:
        super().__init__(f"Image {image_id} is not active.")
        self.image_id = image_id


class InvalidImage(InvalidInput):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Provided object does not match schema 'image': {reason}")


class PropertyNameTooLong(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Custom property should not be greater than 255 characters.")


class NotValidImage(InvalidInput):
    """Data that qemu-img cannot open as its declared format (a damaged or crafted header): the
    client's fault, so 400. The message names the data as the caller shows it and nothing
    else; ``reason`` is qemu-img's, for the operator (a log, the CLI), never for an API user."""

    def __init__(self, *, shown: str, disk_format: str, reason: str) -> None:
        super().__init__(f"{shown} is not a valid {disk_format} image")
        self.reason = reason


class VirtualSizeTooLarge(InvalidInput):
    """An image whose virtual size (what a qcow2 header claims, whatever was sent) is over
    ``[glance] image_virtual_size_cap``: the disk a server booted from it could grow to."""

    def __init__(self, *, shown: str, virtual_size: int, cap: int) -> None:
        super().__init__(
            f"{shown} has a virtual size of {virtual_size} bytes, "
            f"more than the largest allowed ({cap} bytes)"
        )
        self.virtual_size = virtual_size
        self.cap = cap


class FormatsNotSet(InvalidInput):
    def __init__(self, missing: list[str]) -> None:
        noun = "Property" if len(missing) == 1 else "Properties"
        super().__init__(f"{noun} {', '.join(missing)} must be set prior to saving data.")


class ReadOnlyAttribute(Forbidden):
    def __init__(self, name: str) -> None:
        super().__init__(f"Attribute '{name}' is read-only.")


class ReservedAttribute(Forbidden):
    def __init__(self, name: str) -> None:
        super().__init__(f"Attribute '{name}' is reserved.")


class ImageActionForbidden(Forbidden):
    def __init__(self, action: str) -> None:
        super().__init__(f"You are not authorized to complete {action} action.")
        self.action = action


class ForeignOwner(Forbidden):
    def __init__(self, owner: str) -> None:
        super().__init__(f"You are not permitted to create images owned by '{owner}'.")


class ProtectedImage(Forbidden):
    def __init__(self, image_id: str) -> None:
        super().__init__(f"Image {image_id} is protected and cannot be deleted.")


class DuplicateImage(Conflict):
    def __init__(self, image_id: str) -> None:
        super().__init__(f"Image ID {image_id} already exists!")


class ImageStatusConflict(Conflict):
    def __init__(self, *, current: str, wanted: str) -> None:
        super().__init__(f"Image status transition from {current} to {wanted} is not allowed")


class ImageLimitExceeded(TooLarge):
    pass


class ImageFetchFailed(ServiceUnavailable):
    """The image cache could not get an image's data from the API (every attempt failed, or
    what arrived is not what the registry describes). The message says why, for the
    operator (a server fault's details); the server's owner reads only that it failed."""

    def __init__(self, image_id: str, reason: str) -> None:
        super().__init__(f"Image {image_id} could not be fetched: {reason}")
        self.image_id = image_id
        self.reason = reason

    @property
    def public_message(self) -> str:
        return f"Image {self.image_id} could not be fetched by the compute host."
