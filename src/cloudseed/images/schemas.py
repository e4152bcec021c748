"""The body of Glance's ``POST /v2/images``, checked as Glance checks it (IO-free).

Glance's image schema lists the base attributes; any other key is an extra property whose value
must be a string. In Glance's order: attributes only the server writes (``self``, ``file``,
``schema``) are refused (403), then the schema (400), then reserved keys (403), then read-only
attributes (403); policy (who may create what) is ``access.check_create``, after this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema

from cloudseed.images.errors import (
    ImageLimitExceeded,
    InvalidImage,
    PropertyNameTooLong,
    ReadOnlyAttribute,
    ReservedAttribute,
)
from cloudseed.images.formats import CONTAINER_FORMATS, DISK_FORMATS, VISIBILITIES

# Glance's defaults for [DEFAULT] image_property_quota and image_tag_quota.
MAX_PROPERTIES = 128
MAX_TAGS = 128
# min_ram and min_disk are 32-bit integer columns in Glance (and here).
MAX_INT32 = 2**31 - 1

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z"
_NULL_OR_STRING = {"type": ["null", "string"]}
_SIZE = {"type": ["null", "integer"]}

CREATE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": UUID_PATTERN},
        "name": {"type": ["null", "string"], "maxLength": 255},
        "visibility": {"type": "string", "enum": list(VISIBILITIES)},
        "protected": {"type": "boolean"},
        "os_hidden": {"type": "boolean"},
        "container_format": {"type": ["null", "string"], "enum": [None, *CONTAINER_FORMATS]},
        "disk_format": {"type": ["null", "string"], "enum": [None, *DISK_FORMATS]},
        "min_ram": {"type": "integer", "minimum": 0, "maximum": MAX_INT32},
        "min_disk": {"type": "integer", "minimum": 0, "maximum": MAX_INT32},
        "owner": {"type": ["null", "string"], "maxLength": 255},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 255}},
        # Read-only: in the schema (so a well-typed value passes it), refused after it.
        "status": {"type": "string"},
        "checksum": {**_NULL_OR_STRING, "maxLength": 32},
        "os_hash_algo": {**_NULL_OR_STRING, "maxLength": 64},
        "os_hash_value": {**_NULL_OR_STRING, "maxLength": 128},
        "size": _SIZE,
        "virtual_size": _SIZE,
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "locations": {"type": "array"},
    },
    "additionalProperties": {"type": "string"},
}
_VALIDATOR = jsonschema.Draft202012Validator(CREATE)

# Set by the server only: refused before the schema is consulted.
DISALLOWED = ("direct_url", "self", "file", "schema", "stores")
READ_ONLY = (
    "created_at",
    "updated_at",
    "status",
    "checksum",
    "os_hash_algo",
    "os_hash_value",
    "size",
    "virtual_size",
)
RESERVED = ("location", "locations", "deleted", "deleted_at")
RESERVED_PREFIX = "os_glance"
BASE = frozenset(CREATE["properties"])


@dataclass(frozen=True)
class NewImage:
    """A valid create request; ``owner`` None means the caller's project."""

    image_id: str | None = None
    name: str | None = None
    disk_format: str | None = None
    container_format: str | None = None
    visibility: str = "shared"  # Glance's default
    protected: bool = False
    os_hidden: bool = False
    min_ram: int = 0
    min_disk: int = 0
    owner: str | None = None
    tags: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)


def parse_create(body: Any) -> NewImage:
    if not isinstance(body, dict):
        raise InvalidImage(f"{body!r} is not of type 'object'")
    for key in DISALLOWED:
        if key in body:
            raise ReadOnlyAttribute(key)
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(body))
    if error is not None:
        raise InvalidImage(error.message)
    extra = {k: v for k, v in body.items() if k not in BASE}
    for key in extra:
        if len(key) > 255:
            raise PropertyNameTooLong()
        if key.startswith(RESERVED_PREFIX):
            raise ReservedAttribute(key)
    for key in RESERVED:
        if key in body:
            raise ReservedAttribute(key)
    for key in READ_ONLY:
        if key in body:
            raise ReadOnlyAttribute(key)
    if len(extra) > MAX_PROPERTIES:
        raise ImageLimitExceeded(
            "The limit has been exceeded on the number of allowed image properties. "
            f"Attempted: {len(extra)}, Maximum: {MAX_PROPERTIES}"
        )
    tags = tuple(dict.fromkeys(body.get("tags", ())))  # a set in Glance; first order kept
    if len(tags) > MAX_TAGS:
        raise ImageLimitExceeded(
            "The limit has been exceeded on the number of allowed image tags. "
            f"Attempted: {len(tags)}, Maximum: {MAX_TAGS}"
        )
    return NewImage(
        image_id=body.get("id"),
        name=body.get("name"),
        disk_format=body.get("disk_format"),
        container_format=body.get("container_format"),
        visibility=body.get("visibility", "shared"),
        protected=body.get("protected", False),
        os_hidden=body.get("os_hidden", False),
        min_ram=body.get("min_ram", 0),
        min_disk=body.get("min_disk", 0),
        owner=body.get("owner"),
        tags=tags,
        properties=extra,
    )
