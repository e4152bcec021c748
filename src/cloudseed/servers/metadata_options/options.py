"""Per-server metadata options (2.109), EC2's ``MetadataOptions``: the IO-free core.

Four fields, each either set on the server or unset (None):

- ``http_endpoint``: ``enabled`` | ``disabled`` (the guest gets 403 for everything);
- ``http_tokens``: ``optional`` | ``required`` (a request without a session token gets 401);
- ``http_put_response_hop_limit``: 1-64, the IP TTL / hop limit of the token PUT's answer;
- ``instance_metadata_tags``: ``enabled`` | ``disabled`` (the server's tags in both trees).

What a server has set is kept in its system metadata (``SYSTEM_METADATA_KEY``, a JSON object
of the set fields only). A project's defaults (``cloudseed:os-metadata-options-defaults``)
are copied into a new server's options at create, for the fields the request leaves unset, as
EC2's account-level defaults apply at launch. A field set by neither follows the cloud: the
``[metadata]`` options ``require_token`` and ``hop_limit``, else EC2's defaults (enabled,
optional, tags disabled): ``effective``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cloudseed.errors import InvalidInput

SYSTEM_METADATA_KEY = "metadata_options"

ENABLED, DISABLED = "enabled", "disabled"
OPTIONAL, REQUIRED = "optional", "required"
MAX_HOP_LIMIT = 64

_CHOICES = {
    "http_endpoint": (ENABLED, DISABLED),
    "http_tokens": (OPTIONAL, REQUIRED),
    "instance_metadata_tags": (ENABLED, DISABLED),
}
_HOP = "http_put_response_hop_limit"

# The request body's ``metadata_options`` (create, PUT /servers/{id}, project defaults): every
# field optional, null meaning unset; no other member.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{
            name: {"type": ["string", "null"], "enum": [*choices, None]}
            for name, choices in _CHOICES.items()
        },
        _HOP: {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_HOP_LIMIT},
    },
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    """What is set (None: unset, see the module's docstring)."""

    http_endpoint: str | None = None
    http_tokens: str | None = None
    http_put_response_hop_limit: int | None = None
    instance_metadata_tags: str | None = None

    @property
    def empty(self) -> bool:
        return self == UNSET

    def over(self, other: MetadataOptions) -> MetadataOptions:
        """These options, with ``other``'s where these are unset."""
        return MetadataOptions(
            **{
                f.name: getattr(self, f.name)
                if getattr(self, f.name) is not None
                else getattr(other, f.name)
                for f in fields(self)
            }
        )

    def changed_by(self, body: Mapping[str, Any]) -> MetadataOptions:
        """These options with a request's members applied: a value sets its field, null
        unsets it, an absent member leaves it as it is."""
        return replace(self, **{name: body[name] for name in _names() if name in body})

    def stored(self) -> str | None:
        """The system metadata value (None: nothing set, no item)."""
        if self.empty:
            return None
        return json.dumps(
            {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)},
            sort_keys=True,
        )

    def body(self) -> dict[str, Any]:
        """Every field, null where unset: the API's view."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


UNSET = MetadataOptions()


def _names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(MetadataOptions))


def from_body(body: Mapping[str, Any] | None) -> MetadataOptions:
    """A request's ``metadata_options`` (already checked against SCHEMA) as options."""
    return UNSET.changed_by(body or {})


def of_system_metadata(system_metadata: Mapping[str, str]) -> MetadataOptions:
    """What a server with ``system_metadata`` has set (UNSET: nothing)."""
    return from_stored(system_metadata.get(SYSTEM_METADATA_KEY)) or UNSET


def from_stored(value: str | None) -> MetadataOptions | None:
    """The options a server's system metadata item holds; None for none set (most servers)."""
    if not value:
        return None
    try:
        stored = json.loads(value)
        found = MetadataOptions(**{k: v for k, v in stored.items() if k in _names()})
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput(f"stored metadata options are not valid: {value[:64]!r}") from None
    return None if found.empty else found


@dataclass(frozen=True, slots=True)
class CloudDefaults:
    """The ``[metadata]`` options that stand in for unset fields."""

    require_token: bool = False
    hop_limit: int = 0  # 0: the system's default TTL (the listener's)


def effective(
    options: MetadataOptions | None, cloud: CloudDefaults, *, tokens_item: bool = False
) -> dict[str, Any]:
    """Every field as the metadata service applies it to a server with ``options`` set, and
    which of them the server sets; a hop limit of None is the system's. ``tokens_item``: the
    server has the metadata item ``metadata_http_tokens=required`` (before 2.109), which
    requires tokens when ``http_tokens`` is unset."""
    own = options or UNSET
    values = own.over(
        MetadataOptions(
            http_endpoint=ENABLED,
            http_tokens=REQUIRED if cloud.require_token or tokens_item else OPTIONAL,
            http_put_response_hop_limit=cloud.hop_limit or None,
            instance_metadata_tags=DISABLED,
        )
    )
    return {
        **values.body(),
        "set_on_server": sorted(k for k, v in own.body().items() if v is not None),
    }
