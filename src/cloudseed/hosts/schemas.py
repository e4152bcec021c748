"""Request bodies of os-services (Nova's schemas)."""

from __future__ import annotations

from typing import Any

_HOST_BINARY = {
    "host": {"type": "string", "minLength": 1, "maxLength": 255},
    "binary": {"type": "string", "minLength": 1, "maxLength": 255},
}


def _legacy(extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**_HOST_BINARY, **extra},
        "required": ["host", "binary", *required],
        "additionalProperties": False,
    }


# Before 2.53: PUT /os-services/<action> with host and binary.
LEGACY_ACTIONS: dict[str, dict[str, Any]] = {
    "enable": _legacy({}, []),
    "disable": _legacy({}, []),
    "disable-log-reason": _legacy(
        {"disabled_reason": {"type": "string", "minLength": 1, "maxLength": 255}},
        ["disabled_reason"],
    ),
    "force-down": _legacy({"forced_down": {"type": "boolean"}}, ["forced_down"]),
}

# From 2.53: PUT /os-services/<uuid>.
UPDATE_V253: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["enabled", "disabled"]},
        "disabled_reason": {"type": "string", "minLength": 1, "maxLength": 255},
        "forced_down": {"type": "boolean"},
    },
    "additionalProperties": False,
    "minProperties": 1,
}
