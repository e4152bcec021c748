"""Server tags' rules (servers/tags.py): Nova's schemas for one tag, the list and create, the
URL's tag, the microversions that take a network's device role tag, and the list filters."""

from __future__ import annotations

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.servers import schemas, tags
from cloudseed.web.microversions import APIVersion
from cloudseed.web.validation import validate

V = APIVersion


@pytest.mark.parametrize("tag", ["a", "x" * 60, "with space", "ünïcode", "a.b-c_d:e"])
def test_good_tags(tag: str) -> None:
    validate(tags.REPLACE_BODY, {"tags": [tag]})
    tags.check_path_tag(tag)


@pytest.mark.parametrize("tag", ["", "x" * 61, "a,b", "a/b", ","])
def test_bad_tags(tag: str) -> None:
    with pytest.raises(InvalidInput):
        validate(tags.REPLACE_BODY, {"tags": [tag]})
    with pytest.raises(InvalidInput) as raised:
        tags.check_path_tag(tag)
    assert str(raised.value).startswith(
        f"Tag '{tag}' is invalid. It must be a non empty string without characters '/' and ','. "
        "Validation error message: "
    )


def test_at_most_fifty_and_only_a_list() -> None:
    validate(tags.REPLACE_BODY, {"tags": [str(i) for i in range(50)]})
    for body in ({"tags": [str(i) for i in range(51)]}, {"tags": "a"}, {}, {"tags": [], "x": 1}):
        with pytest.raises(InvalidInput):
            validate(tags.REPLACE_BODY, body)
    validate(tags.ADD_BODY, None)
    with pytest.raises(InvalidInput):
        validate(tags.ADD_BODY, {"tag": "a"})


@pytest.mark.parametrize(
    ("version", "allowed"),
    [
        ((2, 31), False),
        ((2, 32), True),
        ((2, 36), True),
        ((2, 37), False),
        ((2, 41), False),
        ((2, 42), True),
        ((2, 104), True),
    ],
)
def test_network_tags_where_nova_takes_them(version: tuple[int, int], allowed: bool) -> None:
    assert tags.network_tag_allowed(V(*version)) is allowed
    server = {
        "name": "vm",
        "flavorRef": "1",
        "networks": [{"uuid": "0" * 8 + "-0000-4000-8000-" + "0" * 12, "tag": "a"}],
    }
    if allowed:
        validate(schemas.create(V(*version)), {"server": server})
    else:
        with pytest.raises(InvalidInput):
            validate(schemas.create(V(*version)), {"server": server})


def test_tags_on_create_from_2_52() -> None:
    server = {"name": "vm", "flavorRef": "1", "networks": "auto", "tags": ["a", "b"]}
    validate(schemas.create(V(2, 52)), {"server": server})
    with pytest.raises(InvalidInput):
        validate(schemas.create(V(2, 51)), {"server": server})
    with pytest.raises(InvalidInput):
        validate(schemas.create(V(2, 52)), {"server": {**server, "tags": ["a/b"]}})


def test_list_filters_from_2_26_split_at_commas() -> None:
    query = {"tags": "a,b", "tags-any": "c", "not-tags": "d,e", "not-tags-any": "", "name": "x"}
    assert tags.TagFilter.from_query(query, V(2, 25)) == tags.TagFilter()
    assert not tags.TagFilter.from_query(query, V(2, 25))
    parsed = tags.TagFilter.from_query(query, V(2, 26))
    assert parsed == tags.TagFilter(("a", "b"), ("c",), ("d", "e"), ("",))
    assert parsed
    assert not tags.TagFilter.from_query({"name": "x"}, V(2, 26))


def test_a_filter_names_each_tag_once_and_at_most_a_thousand() -> None:
    parsed = tags.TagFilter.from_query({"tags": "a,b,a"}, V(2, 26))
    assert parsed.all_of == ("a", "b")
    many = ",".join(str(i) for i in range(1001))
    with pytest.raises(InvalidInput, match="At most 1000 tags, 1001 given"):
        tags.TagFilter.from_query({"tags-any": many}, V(2, 26))
    assert len(tags.TagFilter.from_query({"not-tags": many[:-5]}, V(2, 26)).not_all_of) == 1000
