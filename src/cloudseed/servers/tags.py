"""Server tags as Nova has them (2.26): the rules of one tag, the schemas of the tag bodies and
of create's ``tags`` (2.52), and the list filters. IO-free.

A tag is a non-empty string of at most 60 characters without ``/`` (it is a path segment of
``/servers/{id}/tags/{tag}``) or ``,`` (the list filters separate tags with it); a server has
at most 50. The same rule checks a port's device role tag (``networks[].tag``, 2.32 and 2.42).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema

from cloudseed.errors import InvalidInput
from cloudseed.web.microversions import APIVersion

V = APIVersion

SINCE = V(2, 26)  # the tags resource, the list filters and ``tags`` in the server view
ON_CREATE_SINCE = V(2, 52)
MAX_TAGS = 50  # Nova's MAX_TAG_COUNT
MAX_LENGTH = 60  # Nova's MAX_TAG_LENGTH

TAG: dict[str, Any] = {
    "type": "string",
    "pattern": "^[^,/]*$",
    "minLength": 1,
    "maxLength": MAX_LENGTH,
}
TAGS: dict[str, Any] = {"type": "array", "items": TAG, "maxItems": MAX_TAGS}
# PUT /servers/{id}/tags: the whole list.
REPLACE_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {"tags": TAGS},
    "required": ["tags"],
    "additionalProperties": False,
}
# PUT /servers/{id}/tags/{tag}: no body (Nova's schema is ``null``).
ADD_BODY: dict[str, Any] = {"type": "null"}

# The list filters from 2.26, each a comma-separated list of tags. Nova has no bound on how
# many one names; cloudseed refuses more than this many distinct ones (400), so that a query
# string cannot make a query of any size.
FILTERS = ("tags", "tags-any", "not-tags", "not-tags-any")
MAX_FILTER_TAGS = 1000


def network_tag_allowed(version: APIVersion) -> bool:
    """``networks[].tag`` on create: 2.32 to 2.36, then again from 2.42 (2.37 dropped it by
    mistake, as Nova's schemas say)."""
    return V(2, 32) <= version <= V(2, 36) or version >= V(2, 42)


def check_path_tag(tag: str) -> None:
    """A tag named in the URL (``PUT /servers/{id}/tags/{tag}``), with Nova's message."""
    try:
        jsonschema.validate(tag, TAG)
    except jsonschema.ValidationError as exc:
        raise InvalidInput(
            f"Tag '{tag}' is invalid. It must be a non empty string without characters '/' "
            f"and ','. Validation error message: {exc.message}"
        ) from exc


def too_many() -> InvalidInput:
    return InvalidInput(f"The number of tags exceeded the per-server limit {MAX_TAGS}")


@dataclass(frozen=True)
class TagFilter:
    """The tag filters of a server list: ``all_of`` (``tags``), ``any_of`` (``tags-any``),
    ``not_all_of`` (``not-tags``: not every one of them), ``none_of`` (``not-tags-any``).
    An empty tuple filters nothing."""

    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    not_all_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, first: dict[str, str], version: APIVersion) -> TagFilter:
        """From a list's query (each parameter's last value), as Nova reads it: from 2.26,
        each filter split at commas (``tags=`` is one empty tag, which no server has), each
        tag once; before, ignored."""
        if version < SINCE:
            return cls()

        def split(name: str) -> tuple[str, ...]:
            if name not in first:
                return ()
            distinct = tuple(dict.fromkeys(first[name].split(",")))
            if len(distinct) > MAX_FILTER_TAGS:
                raise InvalidInput(
                    f"Invalid filter field: {name}. At most {MAX_FILTER_TAGS} tags, "
                    f"{len(distinct)} given."
                )
            return distinct

        return cls(split("tags"), split("tags-any"), split("not-tags"), split("not-tags-any"))

    def __bool__(self) -> bool:
        return bool(self.all_of or self.any_of or self.not_all_of or self.none_of)
