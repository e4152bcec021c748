"""JSON Schemas for os-keypairs requests, per microversion, with Nova's exact rules (names,
enums, ``additionalProperties``), so the same requests are accepted and refused."""

from __future__ import annotations

import copy
from typing import Any

NAME_FORMAT: dict[str, Any] = {"type": "string", "format": "name", "minLength": 1, "maxLength": 255}


def _name(pattern: str) -> dict[str, Any]:
    return {
        "allOf": [
            NAME_FORMAT,
            {"type": "string", "pattern": pattern, "minLength": 1, "maxLength": 255},
        ]
    }


NAME_V21 = _name(r"^[_\- a-zA-Z0-9]+$")
NAME_V292 = _name(r"^[_\-\@\. a-zA-Z0-9]+$")  # 2.92 allows e-mail-like names
KEY_TYPE = {"type": "string", "enum": ["ssh", "x509"]}


def _create(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "keypair": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            }
        },
        "required": ["keypair"],
        "additionalProperties": False,
    }


CREATE_V21 = _create({"name": NAME_V21, "public_key": {"type": "string"}}, ["name"])
CREATE_V22 = _create(
    {"name": NAME_V21, "type": KEY_TYPE, "public_key": {"type": "string"}}, ["name"]
)
CREATE_V210 = _create(
    {
        "name": NAME_V21,
        "type": KEY_TYPE,
        "public_key": {"type": "string"},
        "user_id": {"type": "string"},
    },
    ["name"],
)
CREATE_V292 = _create(
    {
        "name": NAME_V292,
        "type": KEY_TYPE,
        "public_key": {"type": "string"},
        "user_id": {"type": "string"},
    },
    ["name", "public_key"],
)

_STRINGS = {"type": "array", "items": {"type": "string"}}
_NON_NEGATIVE_INT = {
    "type": "array",
    "items": {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minLength": 1},
}

QUERY_ANY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}
QUERY_V210: dict[str, Any] = {
    "type": "object",
    "properties": {"user_id": _STRINGS},
    "additionalProperties": True,
}
INDEX_QUERY_V235 = copy.deepcopy(QUERY_V210)
INDEX_QUERY_V235["properties"].update({"limit": _NON_NEGATIVE_INT, "marker": _STRINGS})
INDEX_QUERY_V275 = {**copy.deepcopy(INDEX_QUERY_V235), "additionalProperties": False}
QUERY_V275 = {**copy.deepcopy(QUERY_V210), "additionalProperties": False}
