"""JSON Schemas of ``os-quota-sets``, Nova's (nova/api/openstack/compute/schemas/quota_sets.py):
the PUT body per microversion range and the query strings (extra parameters refused from
2.75)."""

from __future__ import annotations

import copy
from typing import Any

from cloudseed.quotas.service import NETWORK_RESOURCES, PERSONALITY_RESOURCES, RESOURCES

MAX_LIMIT = 0x7FFFFFFF  # Nova's MAX_INT (the column's range)

LIMIT: dict[str, Any] = {
    "type": ["integer", "string"],
    "pattern": "^-?[0-9]+$",
    "minimum": -1,
    "maximum": MAX_LIMIT,
    # Not Nova's: a string is bounded before it is converted (issue 13).
    "maxLength": 11,
}
BOOLEAN: dict[str, Any] = {
    "type": ["boolean", "string"],
    "enum": [
        True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
        False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no",
    ],
}  # fmt: skip


def _update(resources: tuple[str, ...]) -> dict[str, Any]:
    properties: dict[str, Any] = dict.fromkeys(resources, LIMIT)
    properties["force"] = BOOLEAN
    return {
        "type": "object",
        "properties": {
            "quota_set": {"type": "object", "properties": properties, "additionalProperties": False}
        },
        "required": ["quota_set"],
        "additionalProperties": False,
    }


RESOURCES_V236 = tuple(r for r in RESOURCES if r not in NETWORK_RESOURCES)
RESOURCES_V257 = tuple(r for r in RESOURCES_V236 if r not in PERSONALITY_RESOURCES)

UPDATE = _update(RESOURCES)
UPDATE_V236 = _update(RESOURCES_V236)
UPDATE_V257 = _update(RESOURCES_V257)

QUERY: dict[str, Any] = {
    "type": "object",
    "properties": {"user_id": {"type": "array", "items": {"type": "string"}}},
    "additionalProperties": True,
}
QUERY_V275 = {**copy.deepcopy(QUERY), "additionalProperties": False}
DEFAULTS_QUERY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
