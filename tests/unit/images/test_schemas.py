"""images/schemas.py: Glance's create body, checked in Glance's order with its messages."""

from __future__ import annotations

from typing import Any

import pytest

from cloudseed.errors import CloudseedError
from cloudseed.images.errors import (
    ImageLimitExceeded,
    InvalidImage,
    PropertyNameTooLong,
    ReadOnlyAttribute,
    ReservedAttribute,
)
from cloudseed.images.schemas import MAX_PROPERTIES, NewImage, parse_create


def test_defaults_are_glances() -> None:
    assert parse_create({}) == NewImage(visibility="shared", container_format=None)


def test_everything_a_create_may_set() -> None:
    new = parse_create(
        {
            "id": "8f7c1d3e-2b4a-4c5d-9e6f-0a1b2c3d4e5f",
            "name": None,
            "disk_format": "qcow2",
            "container_format": "bare",
            "visibility": "community",
            "protected": True,
            "os_hidden": True,
            "min_ram": 512,
            "min_disk": 1,
            "owner": "p",
            "tags": ["b", "a", "b"],
            "hw_cdrom_bus": "scsi",
        }
    )
    assert new.tags == ("b", "a")  # a set in Glance; the first order is kept
    assert new.properties == {"hw_cdrom_bus": "scsi"}
    assert (new.visibility, new.protected, new.os_hidden, new.min_ram) == (
        "community",
        True,
        True,
        512,
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"file": "/x", "status": 5}, ReadOnlyAttribute),  # before the schema, as Glance
        ({"status": 5}, InvalidImage),  # the schema before read-only attributes
        ({"status": "active"}, ReadOnlyAttribute),
        ({"checksum": None}, ReadOnlyAttribute),
        ({"locations": []}, ReservedAttribute),
        ({"deleted_at": "x"}, ReservedAttribute),
        ({"os_glance_stage_host": "x"}, ReservedAttribute),
        ({"a" * 256: "x"}, PropertyNameTooLong),
        ({"name": "x" * 256}, InvalidImage),
        ({"protected": "yes"}, InvalidImage),
        ({"min_disk": 2**31}, InvalidImage),
        ({"min_ram": True}, InvalidImage),
        ({"id": "8f7c1d3e-2b4a-4c5d-9e6f-0a1b2c3d4e5f\n"}, InvalidImage),
        ({"tags": ["x" * 256]}, InvalidImage),
        ({"tags": [str(i) for i in range(129)]}, ImageLimitExceeded),
        ({f"p{i}": "v" for i in range(MAX_PROPERTIES + 1)}, ImageLimitExceeded),
        ([], InvalidImage),
    ],
)
def test_refusals(body: Any, error: type[CloudseedError]) -> None:
    with pytest.raises(error):
        parse_create(body)


def test_schema_messages_name_glances_schema() -> None:
    with pytest.raises(InvalidImage) as info:
        parse_create({"visibility": "everyone"})
    assert info.value.message == (
        "Provided object does not match schema 'image': 'everyone' is not one of "
        "['public', 'community', 'shared', 'private']"
    )
