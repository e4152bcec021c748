"""The Glance slice's bodies and list query: an image as Glance shows it, and ``GET
/v2/images``'s filters, order and pages.

Glance flattens an image's extra properties into its body, next to the base attributes (which
win a clash). Checksums are MD5 (``checksum``) and SHA-256 (``os_hash_algo``, as a Glance
configured with ``hashing_algorithm = sha256``); an image without data shows null for them and
for its sizes.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Any

from cloudseed.errors import InvalidInput
from cloudseed.images import service
from cloudseed.images.models import Image

# Query parameters that are not filters on a property.
PAGING = frozenset({"limit", "marker", "sort", "sort_key", "sort_dir", "member_status"})
ATTRIBUTE_FILTERS = ("id", "name", "status", "owner", "disk_format", "container_format")
# Filters Glance's "in:" operator applies to: ``id=in:a,b`` matches either (the openstack
# CLI's server list asks for its servers' images this way to show their names).
IN_FILTERS = ("id", "name", "status", "disk_format", "container_format")
LIST_VISIBILITIES = ("community", "public", "private", "shared", "all")


def _time(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def image_body(image: Image) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": image.uuid,
        "name": image.name,
        "status": image.status,
        "disk_format": image.disk_format,
        "container_format": image.container_format,
        "size": image.size,
        "virtual_size": image.virtual_size,
        "min_disk": image.min_disk,
        "min_ram": image.min_ram,
        "checksum": image.checksum_md5,
        "os_hash_algo": "sha256" if image.checksum_sha256 else None,
        "os_hash_value": image.checksum_sha256,
        "owner": image.owner,
        "visibility": image.visibility,
        "protected": image.protected,
        "os_hidden": image.os_hidden,
        "tags": service.tags_of(image),
        "created_at": _time(image.created_at),
        "updated_at": _time(image.updated_at or image.created_at),
        "self": f"/v2/images/{image.uuid}",
        "file": f"/v2/images/{image.uuid}/file",
        "schema": "/v2/schemas/image",
    }
    for key, value in service.properties_of(image).items():
        body.setdefault(key, value)
    return body


@dataclass(frozen=True)
class ListQuery:
    visibility: str | None
    os_hidden: bool
    protected: bool | None
    tags: tuple[str, ...]
    equals: dict[str, tuple[str, ...]]  # attribute and property filters: the values accepted
    limit: int | None
    marker: str | None


def _flag(value: str, name: str) -> bool:
    if value not in ("true", "false"):
        raise InvalidInput(
            f"Invalid value '{value}' for '{name}' filter. Valid values are 'true' or 'false'."
        )
    return value == "true"


def list_query(params: list[tuple[str, str]], *, max_limit: int) -> ListQuery:
    """Glance's list parameters, checked with its messages. Several ``tag`` mean all of
    them; any parameter that is not an attribute filter or paging is a property to match."""
    single = dict(params)
    visibility = single.get("visibility") or None
    if visibility is not None and visibility not in LIST_VISIBILITIES:
        raise InvalidInput(f"Invalid visibility value: {visibility}")
    if "changes-since" in single:
        raise InvalidInput('The "changes-since" filter is no longer available on v2.')
    limit = None
    if "limit" in single:
        text = single["limit"]
        if not text.isascii() or not text.lstrip("-").isdigit() or len(text) > 20:
            raise InvalidInput("limit param must be an integer")
        if int(text) < 0:
            raise InvalidInput("limit param must be positive")
        limit = int(text)
    limit = min(limit if limit is not None else max_limit, max_limit)
    protected = single.get("protected")
    return ListQuery(
        visibility=visibility,
        os_hidden=_flag(single.get("os_hidden", "false"), "os_hidden"),
        protected=None if protected is None else _flag(protected, "protected"),
        tags=tuple(value for key, value in params if key == "tag"),
        equals={
            key: _accepted(key, value)
            for key, value in single.items()
            if key not in PAGING and key not in ("visibility", "os_hidden", "protected", "tag")
        },
        limit=limit,
        marker=single.get("marker"),
    )


def _accepted(key: str, value: str) -> tuple[str, ...]:
    """The values a filter accepts: ``in:a,"b,c"`` is either of ``a`` and ``b,c`` (Glance
    quotes values that hold commas) for the filters that have the operator, else the value."""
    if key in IN_FILTERS and value.startswith("in:"):
        listed = next(csv.reader([value[3:]]), [])
        if not listed or "" in listed:
            raise InvalidInput(f"Invalid filter value {value}. The list is empty or malformed.")
        return tuple(listed)
    return (value,)


def matches(image: Image, query: ListQuery) -> bool:
    if image.os_hidden != query.os_hidden:
        return False
    if query.protected is not None and image.protected != query.protected:
        return False
    tags = service.tags_of(image)
    if any(tag not in tags for tag in query.tags):
        return False
    props = service.properties_of(image)
    for key, accepted in query.equals.items():
        value: str | None
        if key == "id":
            value = image.uuid
        else:
            value = getattr(image, key) if key in ATTRIBUTE_FILTERS else props.get(key)
        if value not in accepted:
            return False
    return True


def page(images: list[Image], query: ListQuery) -> tuple[list[Image], str | None]:
    """The images after ``marker``, at most ``limit``; and the next page's marker, if any."""
    if query.marker is not None:
        ids = [i.uuid for i in images]
        if query.marker not in ids:
            raise InvalidInput(f"No image found with ID {query.marker}")
        images = images[ids.index(query.marker) + 1 :]
    if query.limit is not None and len(images) > query.limit:
        shown = images[: query.limit]
        return shown, (shown[-1].uuid if shown else None)
    return images, None
