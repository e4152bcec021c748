"""JSON Schemas of the config drive resource's requests (``api.py``)."""

from __future__ import annotations

from cloudseed.configdrive.ironic import FORMATS

# GET /servers/{id}/config-drive (2.108): the form, and nothing else.
SHOW_QUERY = {
    "type": "object",
    "properties": {"format": {"type": "string", "enum": list(FORMATS)}},
    "required": ["format"],
    "additionalProperties": False,
}
