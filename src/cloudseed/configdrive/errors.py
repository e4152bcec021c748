"""Config drive errors.

    InvalidInput ─────── UnreadableDrive     an image given to ``show`` (or the drive a
                                             rebuild carries files from) is not one we can read
                 └────── UnknownDriveFormat  a format other than iso9660 or vfat
    Conflict ─────────── NotInJsonForm       the drive holds what Ironic's JSON form cannot
                                             carry (binary user data, personality files)
    ServiceUnavailable ─ DriveBuildFailed    writing the image failed (disk full, permissions);
                                             the previous drive is untouched

A build that fails for vendordata raises ``vendordata.VendordataError`` as it is.
"""

from __future__ import annotations

from cloudseed.errors import Conflict, InvalidInput, ServiceUnavailable


class UnreadableDrive(InvalidInput):
    pass


class UnknownDriveFormat(InvalidInput):
    def __init__(self, fmt: str) -> None:
        super().__init__(f"Unknown config drive format {fmt!r}: iso9660 or vfat.")
        self.format = fmt


class NotInJsonForm(Conflict):
    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The config drive cannot take Ironic's JSON form: {reason}. "
            "The ironic form (the gzipped ISO) carries it."
        )
        self.reason = reason


class DriveBuildFailed(ServiceUnavailable):
    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"Building the config drive {path} failed: {reason}")
        self.path = path
        self.reason = reason
