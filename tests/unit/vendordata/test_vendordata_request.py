"""The request body DynamicJSON posts, and the JSON helpers behind the documents."""

from __future__ import annotations

import json

import pytest

from cloudseed.vendordata import VendordataRequest, documents
from cloudseed.vendordata.errors import NotJSON


def make(**changes: object) -> VendordataRequest:
    fields: dict[str, object] = {
        "project_id": "p",
        "instance_id": "i",
        "image_id": "",
        "user_data": None,
        "hostname": "h",
        "metadata": {"b": "2", "a": "1"},
        "boot_roles": "",
    }
    fields.update(changes)
    return VendordataRequest(**fields)  # type: ignore[arg-type]


def test_body_has_novas_keys_in_novas_order() -> None:
    body = json.loads(make(user_data="aGk=", boot_roles="admin").body())
    assert list(body) == [
        "project-id",
        "instance-id",
        "image-id",
        "user-data",
        "hostname",
        "metadata",
        "boot-roles",
    ]
    assert body["user-data"] == "aGk="  # base64 as stored, not decoded
    assert body["image-id"] == ""
    assert make().body().count(b"null") == 1  # no user data: null


def test_body_does_not_depend_on_metadata_order() -> None:
    one = make(metadata={"b": "2", "a": "1"}).body()
    assert one == make(metadata={"a": "1", "b": "2"}).body()
    assert one != make(metadata={"a": "1", "b": "3"}).body()
    assert b'"metadata":{"a":"1","b":"2"}' in one


def test_body_keeps_unicode_as_utf8() -> None:
    assert "été".encode() in make(hostname="été").body()


@pytest.mark.parametrize("text", [b"NaN", b"[Infinity]", b"{", b"\xff", b"{} {}"])
def test_parse_refuses_what_is_not_json(text: bytes) -> None:
    with pytest.raises(NotJSON):
        documents.parse(text)


def test_normalise_compacts_and_treats_blank_as_empty_object() -> None:
    assert documents.normalise(b'{ "a" : [1, 2] }\n') == b'{"a":[1,2]}'
    assert documents.normalise(b"") == b"{}"
    assert documents.normalise(b"  \r\n") == b"{}"


def test_join_object_keeps_order_and_escapes_keys() -> None:
    joined = documents.join_object([("z", b"1"), ('q"uote', b"{}"), ("a", b"[]")])
    assert joined == b'{"z":1,"q\\"uote":{},"a":[]}'
    assert list(json.loads(joined)) == ["z", 'q"uote', "a"]
    assert documents.join_object([]) == b"{}"
