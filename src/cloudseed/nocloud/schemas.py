"""The NoCloud seed resource's microversion and the body of its action."""

from __future__ import annotations

from typing import Any

from cloudseed.web.microversions import APIVersion

# cloudseed's third microversion: the resource does not exist below it (404, as Nova's
# microversioned resources).
NOCLOUD_SEEDS = APIVersion(2, 107)

# POST /servers/{id}/nocloud-seed/action: one verb, as Nova's server actions ({"os-start": null}).
ACTION: dict[str, Any] = {
    "type": "object",
    "properties": {"rotate": {"type": "null"}, "revoke": {"type": "null"}},
    "minProperties": 1,
    "maxProperties": 1,
    "additionalProperties": False,
}
