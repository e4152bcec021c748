"""Server errors, with Nova's messages.

InvalidInput ── InvalidKeyName        key_name unknown for the caller     (400)
                ServerMarkerNotFound  ?marker= names no listed server     (400)
                PasswordTooLarge      a posted password over 1020 bytes    (400)
                InstanceGroupNotFound  a `group` scheduler hint: no server groups (400)
                UnknownSecurityGroup  create: a security group that does not exist (400)
                PersonalityNotDecodable  a personality file's contents are not base64 (400)
QuotaExceeded ─ TooManyPersonalityFiles    more files than injected_files    (403)
                ├ PersonalityPathTooLong     a path over the path limit       (403)
                └ PersonalityContentTooLong  a content over the content limit (403)
                TooManyMetadataItems  more items than metadata_items       (403)
Forbidden ───── VolumeBackedRequiredForZeroDiskFlavor  a non-admin's image-booted
                                      server on a flavor with disk 0 (403)
Conflict ────── InstanceInvalidState  busy or in the wrong state          (409)
                InstanceHasConfigDrive  user data needs a hard reboot      (409)
                InstanceIsLocked      locked, and the caller is no admin  (409)
                PinnedZoneChange      2.104: pinned elsewhere, unpin first (409)
                NotCurrentZone        2.104: a pin to a zone the server is not in (409)
                PasswordAlreadySet    the guest's password is set once     (409)
                ServerNameNotUnique   `cloudseed server ssh NAME`: several servers (409)
                NoSshForward          `cloudseed server ssh`: no way in, and why (409)
NotFound ────── MetadataItemNotFound  no such metadata key               (404)
                TagNotFound           2.26: the server has no such tag    (404)
                ActionNotFound        no instance action with this id    (404)
                ConsoleNotAvailable   the guest's console is not readable here (404)
                SecurityGroupNotFound  add/remove: no such group for the project (404)
                NoPortsForSecurityGroup  add/remove: the server has no ports (404)
                SecurityGroupNotAssociated  remove: the server is not in that group (404)
                (cells.InstanceNotFound: no such server)                   (404)
Exception ───── NotStarted            a background operation failed before the driver ran;
                                      the instance keeps its vm_state (never an API answer)
"""

from __future__ import annotations

from cloudseed.errors import Conflict, Forbidden, InvalidInput, NotFound, QuotaExceeded


class InvalidKeyName(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Invalid key_name provided.")


class InstanceGroupNotFound(InvalidInput):
    """Nova's InstanceGroupNotFound, which its create answers with 400."""

    def __init__(self, group: str) -> None:
        super().__init__(f"Instance group {group} could not be found.")
        self.group = group


class VolumeBackedRequiredForZeroDiskFlavor(Forbidden):
    """Nova's BootFromVolumeRequiredForZeroDiskFlavor (policy
    ``os_compute_api:servers:create:zero_disk_flavor``, admin only by default since Ussuri):
    a flavor with disk 0 would let an image of any virtual size fill the host's disk."""

    def __init__(self) -> None:
        super().__init__("Only volume-backed servers are allowed for flavors with zero disk.")


class PasswordTooLarge(InvalidInput):
    def __init__(self) -> None:
        super().__init__("Request is too large.")


class PersonalityNotDecodable(InvalidInput):
    def __init__(self, path: str) -> None:
        super().__init__(f"Personality content for {path} cannot be decoded.")


class PasswordAlreadySet(Conflict):
    def __init__(self) -> None:
        super().__init__("The password has already been set.")


class InstanceInvalidState(Conflict):
    def __init__(self, *, uuid: str, operation: str, attr: str, state: str | None) -> None:
        super().__init__(f"Cannot '{operation}' instance {uuid} while it is in {attr} {state}")
        self.uuid = uuid
        self.operation = operation


class InstanceIsLocked(Conflict):
    def __init__(self, uuid: str) -> None:
        super().__init__(f"Instance {uuid} is locked")
        self.uuid = uuid


class PinnedZoneChange(Conflict):
    def __init__(self) -> None:
        super().__init__(
            "Cannot change pinned availability zone directly. Unpin first by setting "
            "pinned_availability_zone to null."
        )


class NotCurrentZone(Conflict):
    def __init__(self, *, current: str, requested: str) -> None:
        super().__init__(
            f"Server can only be pinned to its current availability zone '{current}', but "
            f"'{requested}' was requested."
        )
        self.current = current
        self.requested = requested


class InstanceHasConfigDrive(Conflict):
    def __init__(self, uuid: str) -> None:
        super().__init__(
            f"Instance {uuid} has a config drive, which holds the user data, so it cannot be "
            "updated in place. Use a hard reboot with user_data instead: POST "
            f'/servers/{uuid}/action {{"reboot": {{"type": "HARD", "user_data": ...}}}}'
        )
        self.uuid = uuid


class TooManyPersonalityFiles(QuotaExceeded):
    def __init__(
        self,
        limit: int,
        *,
        message: str = "Personality file limit exceeded",
        resource: str = "injected_files",
    ) -> None:
        super().__init__(message, resource=resource, limit=limit)


class TooManyMetadataItems(QuotaExceeded):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"Maximum number of metadata items exceeds {limit}",
            resource="metadata_items",
            limit=limit,
        )


class PersonalityPathTooLong(TooManyPersonalityFiles):
    def __init__(self, limit: int) -> None:
        super().__init__(
            limit,
            message=f"Personality file path exceeds maximum {limit}",
            resource="injected_file_path_bytes",
        )


class PersonalityContentTooLong(TooManyPersonalityFiles):
    def __init__(self, limit: int) -> None:
        super().__init__(
            limit,
            message=f"Personality file content exceeds maximum {limit}",
            resource="injected_file_content_bytes",
        )


class ServerMarkerNotFound(InvalidInput):
    def __init__(self, marker: str) -> None:
        super().__init__(f"marker [{marker}] not found")


class MetadataItemNotFound(NotFound):
    def __init__(self) -> None:
        super().__init__("Metadata item was not found")


class TagNotFound(NotFound):
    """Nova's two messages: ``GET`` says "Server", ``DELETE`` "Instance"."""

    def __init__(self, *, uuid: str, tag: str, noun: str = "Server") -> None:
        super().__init__(f"{noun} {uuid} has no tag '{tag}'")
        self.uuid = uuid
        self.tag = tag


class ConsoleNotAvailable(NotFound):
    """Nova's 404 for a console that cannot be read (here: the guest's host is not this
    node's own compute host, and its agent stored no tail of it yet)."""

    def __init__(self, uuid: str) -> None:
        super().__init__("Guest does not have a console available.")
        self.uuid = uuid


class UnknownSecurityGroup(InvalidInput):
    def __init__(self, name: str, *, project_id: str) -> None:
        super().__init__(f"Security group {name} not found for project {project_id}.")
        self.name = name


class SecurityGroupNotFound(NotFound):
    """Nova's SecurityGroupNotFound, in the words of its Neutron security group API (also the
    next two)."""

    def __init__(self, name: str, *, project_id: str) -> None:
        super().__init__(f"Security group {name} is not found for project {project_id}")
        self.name = name


class NoPortsForSecurityGroup(NotFound):
    def __init__(self, uuid: str) -> None:
        super().__init__(f"instance_id {uuid} could not be found as device id on any ports")
        self.uuid = uuid


class SecurityGroupNotAssociated(NotFound):
    def __init__(self, name: str, *, uuid: str) -> None:
        super().__init__(f"Security group {name} not associated with the instance {uuid}")
        self.name = name
        self.uuid = uuid


class ActionNotFound(NotFound):
    def __init__(self, request_id: str) -> None:
        super().__init__(f"Action {request_id} not found")


class ServerNameNotUnique(Conflict):
    def __init__(self, name: str, uuids: list[str]) -> None:
        super().__init__(
            f"More than one server is named {name!r} ({', '.join(sorted(uuids))}); use its id."
        )
        self.name = name
        self.uuids = uuids


class NoSshForward(Conflict):
    """The server has no SSH forward recorded; ``reason`` says why, for the operator."""

    def __init__(self, uuid: str, reason: str) -> None:
        super().__init__(f"Server {uuid} has no SSH forward: {reason}.")
        self.uuid = uuid
        self.reason = reason


class NotStarted(Exception):
    """The operation failed before the driver was called and the guest is as it was: the
    instance keeps its vm_state (the reboot that could not rebuild its config drive)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause
