"""JSON Schemas of the server actions other than rebuild and reboot (``servers/schemas.py``):
the bodyless ones, lock, console output and os-resetState, as Nova's. IO-free."""

from __future__ import annotations

from typing import Any

from cloudseed.web.microversions import APIVersion

EMPTY_ACTION = {"type": ["object", "null"]}
# ``lock``: from 2.73 an optional ``locked_reason``; before, Nova does not look at the body.
LOCK_V273 = {
    "type": ["object", "null"],
    "properties": {"locked_reason": {"type": "string", "minLength": 1, "maxLength": 255}},
    "additionalProperties": False,
}


def lock(version: APIVersion) -> dict[str, Any]:
    return LOCK_V273 if version >= APIVersion(2, 73) else {}


# Nova's: -1 (or null) is the whole log; a string of digits is taken too.
CONSOLE_OUTPUT = {
    "type": "object",
    "properties": {
        "length": {"type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$", "minimum": -1}
    },
    "additionalProperties": False,
}

# Nova's os-resetState body: the vm_state to force ("active" or "error").
RESET_STATE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "os-resetState": {
            "type": "object",
            "properties": {"state": {"type": "string", "enum": ["active", "error"]}},
            "required": ["state"],
            "additionalProperties": False,
        }
    },
    "required": ["os-resetState"],
    "additionalProperties": False,
}
