"""Config drive errors.

    InvalidInput ─────── UnreadableDrive     an image given to ``show`` (or the drive a
                                             rebuild carries files from) is not one we can read
                 └────── UnknownDriveFormat  a format other than iso9660 or vfat
    ServiceUnavailable ─ DriveBuildFailed    writing the image failed (disk full, permissions);
                                             the previous drive is untouched

A build that fails for vendordata raises ``vendordata.VendordataError`` as it is.
"""

from __future__ import annotations

from cloudseed.errors import InvalidInput, ServiceUnavailable


class UnreadableDrive(InvalidInput):
    pass


class UnknownDriveFormat(InvalidInput):
    def __init__(self, fmt: str) -> None:
        super().__init__(f"Unknown config drive format {fmt!r}: iso9660 or vfat.")
        self.format = fmt


class DriveBuildFailed(ServiceUnavailable):
    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"Building the config drive {path} failed: {reason}")
        self.path = path
        self.reason = reason
