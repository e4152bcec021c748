"""JSON Schemas of live keys (2.106): a server's ``key_names`` (create, update, rebuild) and
the body of PUT /os-project-keys/{project_id}. IO-free.

How many keys: [api] max_keys_per_server, checked in code (a setting; the servers' schemas
are built once per version). An expiry's form and time are checked in code too (``sets.py``).
"""

from __future__ import annotations

from typing import Any

from cloudseed.keypairs.schemas import NAME_FORMAT
from cloudseed.web.microversions import APIVersion

LIVE_KEYS = APIVersion(2, 106)
_EXPIRES_AT = {"type": ["string", "null"], "minLength": 1, "maxLength": 64}

# Each item a key pair's name, or the name with an expiry.
KEY_NAMES: dict[str, Any] = {
    "type": "array",
    "items": {
        "oneOf": [
            NAME_FORMAT,
            {
                "type": "object",
                "properties": {"name": NAME_FORMAT, "expires_at": _EXPIRES_AT},
                "required": ["name"],
                "additionalProperties": False,
            },
        ]
    },
}

# Project keys, the body of PUT /os-project-keys/{project_id}: the whole list, in order.
PROJECT_KEYS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "project_keys": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": NAME_FORMAT,
                    "user_id": {"type": "string", "minLength": 1, "maxLength": 255},
                    "expires_at": _EXPIRES_AT,
                },
                "required": ["name", "user_id"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["project_keys"],
    "additionalProperties": False,
}
