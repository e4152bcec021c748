"""images/glance_views.py: an image as Glance shows it, and the list query."""

from __future__ import annotations

import datetime as dt

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.images.glance_views import image_body, list_query, matches, page
from cloudseed.images.models import Image

CREATED = dt.datetime(2026, 11, 25, 9, 0, 0)


def image(uuid: str = "i1", **fields: object) -> Image:
    values: dict[str, object] = {
        "uuid": uuid,
        "name": "n",
        "status": "queued",
        "properties": "{}",
        "tags": "[]",
        "visibility": "private",
        "protected": False,
        "os_hidden": False,
        "min_ram": 0,
        "min_disk": 0,
        "created_at": CREATED,
    }
    values.update(fields)
    return Image(**values)


def test_a_queued_image_shows_nulls_for_what_its_data_gives() -> None:
    body = image(owner="p", properties='{"os_distro": "debian", "name": "clash"}')
    shown = image_body(body)
    assert {k: shown[k] for k in ("size", "virtual_size", "checksum", "os_hash_algo")} == {
        "size": None,
        "virtual_size": None,
        "checksum": None,
        "os_hash_algo": None,
    }
    assert shown["os_distro"] == "debian" and shown["name"] == "n"  # base attributes win
    assert shown["updated_at"] == shown["created_at"] == "2026-11-25T09:00:00Z"
    assert (shown["self"], shown["file"]) == ("/v2/images/i1", "/v2/images/i1/file")


def test_an_active_image_shows_its_checksums() -> None:
    shown = image_body(image(status="active", checksum_md5="m" * 32, checksum_sha256="s" * 64))
    assert (shown["checksum"], shown["os_hash_algo"], shown["os_hash_value"]) == (
        "m" * 32,
        "sha256",
        "s" * 64,
    )


def test_filters() -> None:
    query = list_query(
        [("tag", "a"), ("tag", "b"), ("os_distro", "debian"), ("name", "n"), ("limit", "5")],
        max_limit=1000,
    )
    assert query.tags == ("a", "b") and query.limit == 5
    tagged = image(tags='["a", "b", "c"]', properties='{"os_distro": "debian"}')
    assert matches(tagged, query)
    assert not matches(image(tags='["a"]', properties='{"os_distro": "debian"}'), query)
    assert not matches(image(tags='["a", "b"]'), query)
    assert not matches(image(os_hidden=True), list_query([], max_limit=10))
    assert matches(image(os_hidden=True), list_query([("os_hidden", "true")], max_limit=10))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([("visibility", "x")], "Invalid visibility value: x"),
        ([("os_hidden", "yes")], "Invalid value 'yes' for 'os_hidden' filter."),
        ([("limit", "-1")], "limit param must be positive"),
        ([("limit", "1" * 40)], "limit param must be an integer"),
        ([("changes-since", "2020")], 'The "changes-since" filter is no longer available'),
    ],
)
def test_bad_queries(params: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        list_query(params, max_limit=1000)


def test_pages() -> None:
    images = [image(uuid) for uuid in ("a", "b", "c")]
    first, marker = page(images, list_query([("limit", "2")], max_limit=1000))
    assert [i.uuid for i in first] == ["a", "b"] and marker == "b"
    rest, marker = page(images, list_query([("limit", "2"), ("marker", "b")], max_limit=1000))
    assert [i.uuid for i in rest] == ["c"] and marker is None
    capped, marker = page(images, list_query([], max_limit=1))
    assert [i.uuid for i in capped] == ["a"] and marker == "a"
    with pytest.raises(InvalidInput, match="No image found with ID z"):
        page(images, list_query([("marker", "z")], max_limit=1000))
