"""JSON Schemas of the metadata options (2.109): the body of PUT
/os-metadata-options-defaults/{project_id}. IO-free.

A server's own ``metadata_options`` (create, PUT /servers/{id}) is ``options.SCHEMA``, which
this body holds too.
"""

from __future__ import annotations

from typing import Any

from cloudseed.servers.metadata_options.options import SCHEMA
from cloudseed.web.microversions import APIVersion

OPTIONS_SINCE = APIVersion(2, 109)

# The project's defaults, replaced whole.
DEFAULTS_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {"metadata_options": SCHEMA},
    "required": ["metadata_options"],
    "additionalProperties": False,
}
