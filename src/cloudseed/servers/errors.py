"""Server errors, with Nova's messages.

    InvalidInput ── InvalidKeyName        key_name unknown for the caller     (400)
    Conflict ────── InstanceInvalidState  busy or in the wrong state          (409)
                    InstanceHasConfigDrive  user data needs a hard reboot      (409)
    NotFound ────── cells.InstanceNotFound                                     (404)
"""

from __future__ import annotations

from cloudseed.errors import Conflict, InvalidInput


class InvalidKeyName(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Invalid key_name provided.")


class InstanceInvalidState(Conflict):
    def __init__(self, *, uuid: str, operation: str, attr: str, state: str | None) -> None:
        super().__init__(f"Cannot '{operation}' instance {uuid} while it is in {attr} {state}")
        self.uuid = uuid
        self.operation = operation


class InstanceHasConfigDrive(Conflict):
    def __init__(self, uuid: str) -> None:
        super().__init__(
            f"Instance {uuid} has a config drive, which holds the user data, so it cannot be "
            "updated in place. Use a hard reboot with user_data instead: POST "
            f"/servers/{uuid}/action {{\"reboot\": {{\"type\": \"HARD\", \"user_data\": ...}}}}")
        self.uuid = uuid
