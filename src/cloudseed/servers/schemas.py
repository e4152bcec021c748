"""JSON Schemas for the servers API, per microversion (Nova's rules for the fields cloudseed
serves). Each builder returns the same dict object for the same version range, so validators
are compiled once. The newer features' schemas sit with their domains (``live_keys/schemas.py``,
``metadata_options/schemas.py``, ``notices/rules.py``, ``tags.py``); the other actions' bodies
in ``lifecycle/schemas.py``."""

from __future__ import annotations

import copy
import ipaddress
from functools import cache
from typing import Any

from cloudseed.errors import InvalidInput
from cloudseed.keypairs.schemas import NAME_FORMAT
from cloudseed.servers import tags
from cloudseed.servers.creation import personality
from cloudseed.servers.live_keys.schemas import KEY_NAMES, LIVE_KEYS
from cloudseed.servers.metadata_options import options as metadata_options
from cloudseed.servers.metadata_options import schemas as metadata_options_schemas
from cloudseed.servers.notices.rules import NOTICE_SECONDS, NOTICES_SINCE
from cloudseed.web.microversions import APIVersion

V = APIVersion
NAME: dict[str, Any] = NAME_FORMAT
BOOLEAN = {
    "type": ["boolean", "string"],
    "enum": [
        True,
        "True",
        "TRUE",
        "true",
        "1",
        "ON",
        "On",
        "on",
        "YES",
        "Yes",
        "yes",
        False,
        "False",
        "FALSE",
        "false",
        "0",
        "OFF",
        "Off",
        "off",
        "NO",
        "No",
        "no",
    ],
}
POSITIVE_INT = {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 1, "minLength": 1}
METADATA = {
    "type": "object",
    "patternProperties": {"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
    "additionalProperties": False,
}
NOVA_MAX_USER_DATA = 65535  # base64 characters: [api] max_user_data_bytes' default


def _user_data(limit: int, *, nullable: bool = False) -> dict[str, Any]:
    kind = ["string", "null"] if nullable else "string"
    # Nova's base64; and a whole gzip stream where it starts like one (web/validation.py).
    return {
        "type": kind,
        "format": "base64",
        "allOf": [{"format": "gzip-if-gzip"}],
        "maxLength": limit,
    }


DESCRIPTION = {
    "type": ["string", "null"],
    "minLength": 0,
    "maxLength": 255,
    "pattern": r"^[^\x00-\x1f\x7f]*$",
}
HOSTNAME_LABEL = {
    "type": "string",
    "pattern": "^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$",
    "minLength": 2,
    "maxLength": 63,
}
FQDN = {"type": "string", "pattern": "^[a-zA-Z0-9-._]*$", "minLength": 1, "maxLength": 255}
DISK_CONFIG = {"type": "string", "enum": ["AUTO", "MANUAL"]}
# Nova's parameter_types.name_or_none.
NAME_OR_NONE = {"oneOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]}
NETWORK_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "fixed_ip": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
        "port": {"type": ["string", "null"], "format": "uuid"},
        "uuid": {"type": "string"},
    },
    "additionalProperties": False,
}

# Nova's block device mapping entry; cloudseed accepts the one the openstack CLI always sends
# (boot from the image onto a local disk) and refuses volumes (see creation.py).
BDM_V2: dict[str, Any] = {
    "type": "object",
    "properties": {
        "uuid": {"type": "string", "minLength": 1, "maxLength": 255},
        "boot_index": {"type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$"},
        "source_type": {"type": "string", "enum": ["volume", "image", "snapshot", "blank"]},
        "destination_type": {"type": "string", "enum": ["local", "volume"]},
        "delete_on_termination": BOOLEAN,
        "device_name": {"type": "string"},
        "volume_size": {"type": ["integer", "string", "null"]},
        "guest_format": {"type": "string"},
        "disk_bus": {"type": "string"},
        "device_type": {"type": "string"},
        "no_device": {},
        "connection_info": {"type": "string"},
        "volume_id": {"type": "string"},
        "snapshot_id": {"type": "string"},
        "image_id": {"type": "string"},
        "tag": {"type": "string"},
        "volume_type": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}

_UUID = {"type": "string", "format": "uuid"}
# Nova's schemas/servers.py ``_hints``, at every microversion (servers/creation/scheduler_hints.py).
SCHEDULER_HINTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "group": {"oneOf": [{"type": "array", "items": _UUID}, _UUID]},
        "different_host": {"oneOf": [_UUID, {"type": "array", "items": _UUID}]},
        "same_host": {"type": ["string", "array"], "items": _UUID},
        "query": {"type": ["string", "object"]},
        "target_cell": {"type": "string", "format": "name", "minLength": 1, "maxLength": 255},
        "different_cell": {"type": ["string", "array"], "items": {"type": "string"}},
        "build_near_host_ip": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
        "cidr": {"type": "string", "pattern": "^/[0-9a-f.:]+$"},
    },
    # Nova relaxed it (openstack-dev, June 2015): schedulers take hints of their own.
    "additionalProperties": True,
}


# Personality files went with 2.57 (on create and rebuild), as in Nova.
PERSONALITY_REMOVED = V(2, 57)

# PUT /servers/{id} unpins or re-pins the server's availability zone (servers/creation/pinning.py).
PIN_UPDATE = V(2, 104)

# cloudseed's first microversion: user data can change without a rebuild.
USER_DATA_UPDATE = V(2, 105)


def _wrap(key: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            key: {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            }
        },
        "required": [key],
        "additionalProperties": False,
    }


def _hostname(version: APIVersion) -> dict[str, Any]:
    return FQDN if version >= V(2, 94) else HOSTNAME_LABEL


@cache
def create(version: APIVersion, max_user_data: int = NOVA_MAX_USER_DATA) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": NAME,
        "imageRef": {"type": "string"},
        "flavorRef": {"type": ["string", "integer"], "minLength": 1},
        "adminPass": {"type": "string"},
        "metadata": METADATA,
        "networks": {},  # below: by version
        "OS-DCF:diskConfig": DISK_CONFIG,
        "accessIPv4": {"type": "string", "format": "ipv4"},
        "accessIPv6": {"type": "string", "format": "ipv6"},
        "availability_zone": NAME,
        "config_drive": BOOLEAN,
        "key_name": NAME,
        "min_count": POSITIVE_INT,
        "max_count": POSITIVE_INT,
        "return_reservation_id": BOOLEAN,
        "security_groups": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": NAME},
                "additionalProperties": False,
            },
        },
        "user_data": _user_data(max_user_data),
        "block_device_mapping_v2": {"type": "array", "items": BDM_V2},
    }
    required = ["name", "flavorRef"]
    if version < PERSONALITY_REMOVED:
        props["personality"] = personality.SCHEMA
    if version >= V(2, 19):
        props["description"] = DESCRIPTION
    item = copy.deepcopy(NETWORK_ITEM)
    if tags.network_tag_allowed(version):
        item["properties"]["tag"] = tags.TAG  # a device role tag (meta_data.json's devices)
    props["networks"] = {"type": "array", "items": item}
    if version >= V(2, 37):
        item["properties"]["uuid"] = {"type": "string", "format": "uuid"}
        props["networks"] = {
            "oneOf": [props["networks"], {"type": "string", "enum": ["none", "auto"]}]
        }
        required.append("networks")
    if version >= tags.ON_CREATE_SINCE:
        props["tags"] = tags.TAGS
    if version >= V(2, 74):
        # An admin's choice of compute host and node (Nova's create:requested_destination).
        props["host"] = {"type": "string", "minLength": 1, "maxLength": 255}
        props["hypervisor_hostname"] = {"type": "string", "minLength": 1, "maxLength": 255}
    if version >= V(2, 90):
        props["hostname"] = _hostname(version)
    if version >= LIVE_KEYS:
        props["key_names"] = KEY_NAMES
        props["block_project_keys"] = BOOLEAN
    if version >= metadata_options_schemas.OPTIONS_SINCE:
        props["metadata_options"] = metadata_options.SCHEMA
    schema = _wrap("server", props, required)
    for key in ("os:scheduler_hints", "OS-SCH-HNT:scheduler_hints"):
        schema["properties"][key] = SCHEDULER_HINTS
    return schema


def boot_image(block_devices: list[dict[str, Any]], image_ref: str | None) -> str | None:
    """The image to boot from, given Nova's block device mappings: only image-to-local-disk
    entries are supported (cloudseed has no volumes)."""
    for bdm in block_devices:
        if bdm.get("source_type") != "image" or bdm.get("destination_type", "local") != "local":
            raise InvalidInput(
                "Block device mappings other than an image on a local disk are "
                "not supported: cloudseed has no volume service."
            )
        if str(bdm.get("boot_index", "0")) == "0" and not image_ref:
            image_ref = bdm.get("uuid")
    return image_ref


@cache
def update(version: APIVersion, max_user_data: int = NOVA_MAX_USER_DATA) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": NAME,
        "OS-DCF:diskConfig": DISK_CONFIG,
        "accessIPv4": {"type": "string", "format": "ipv4"},
        "accessIPv6": {"type": "string", "format": "ipv6"},
    }
    if version >= V(2, 19):
        props["description"] = DESCRIPTION
    if version >= V(2, 90):
        props["hostname"] = _hostname(version)
    if version >= PIN_UPDATE:
        props["pinned_availability_zone"] = NAME_OR_NONE
    if version >= USER_DATA_UPDATE:
        props["user_data"] = _user_data(max_user_data, nullable=True)
    if version >= LIVE_KEYS:
        props["key_names"] = KEY_NAMES
        props["block_project_keys"] = BOOLEAN
    if version >= metadata_options_schemas.OPTIONS_SINCE:
        props["metadata_options"] = metadata_options.SCHEMA
    return _wrap("server", props, [])


@cache
def rebuild(version: APIVersion, max_user_data: int = NOVA_MAX_USER_DATA) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": NAME,
        "imageRef": {"type": "string", "format": "uuid"},
        "adminPass": {"type": "string"},
        "metadata": METADATA,
        "preserve_ephemeral": BOOLEAN,
        "OS-DCF:diskConfig": DISK_CONFIG,
        "accessIPv4": {"type": "string", "format": "ipv4"},
        "accessIPv6": {"type": "string", "format": "ipv6"},
    }
    if version < PERSONALITY_REMOVED:
        props["personality"] = personality.SCHEMA
    if version >= V(2, 19):
        props["description"] = DESCRIPTION
    if version >= V(2, 54):
        props["key_name"] = {"type": ["string", "null"], "minLength": 1, "maxLength": 255}
    if version >= V(2, 57):
        props["user_data"] = _user_data(max_user_data, nullable=True)
    if version >= V(2, 90):
        props["hostname"] = _hostname(version)
    if version >= LIVE_KEYS:
        props["key_names"] = KEY_NAMES
    if version >= NOTICES_SINCE:
        props["notice_seconds"] = NOTICE_SECONDS  # servers/notices/
    return _wrap("rebuild", props, ["imageRef"])


@cache
def reboot(version: APIVersion, max_user_data: int = NOVA_MAX_USER_DATA) -> dict[str, Any]:
    props: dict[str, Any] = {
        "type": {"type": "string", "enum": ["HARD", "Hard", "hard", "SOFT", "Soft", "soft"]}
    }
    if version >= USER_DATA_UPDATE:
        props["user_data"] = _user_data(max_user_data, nullable=True)
    if version >= NOTICES_SINCE:
        props["notice_seconds"] = NOTICE_SECONDS  # servers/notices/
    return _wrap("reboot", props, ["type"])


METADATA_BODY = {
    "type": "object",
    "properties": {"metadata": METADATA},
    "required": ["metadata"],
    "additionalProperties": False,
}
METADATA_ITEM_BODY = {
    "type": "object",
    "properties": {"meta": {**METADATA, "minProperties": 1, "maxProperties": 1}},
    "required": ["meta"],
    "additionalProperties": False,
}


def true_value(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1", "on", "yes"))


def ipv6_text(value: str | None) -> str | None:
    """An IPv6 address as Nova stores it (netaddr's compact form: ``::babe:dc0c:1602``)."""
    if not value:
        return value
    return ipaddress.IPv6Address(value).compressed
