"""ETags: the same for one document and generation in any process, different otherwise;
If-None-Match as RFC 9110 reads it."""

from __future__ import annotations

import pytest

from cloudseed.metadata import etags, tree


def test_record_tags_follow_generation_and_document() -> None:
    a, b = etags.Tagger("fp"), etags.Tagger("fp")  # two workers
    meta = tree.parse("/openstack/latest/meta_data.json")
    user = tree.parse("/openstack/latest/user_data")
    assert a.of_record(3, (meta, False)) == b.of_record(3, (meta, False))
    assert a.of_record(3, (meta, False)) != a.of_record(4, (meta, False))
    assert a.of_record(3, (meta, False)) != a.of_record(3, (user, False))
    assert a.of_record(3, (meta, False)) != a.of_record(3, (meta, True))
    assert a.of_record(3, (meta, False)) != etags.Tagger("other").of_record(3, (meta, False))
    tag = a.of_record(3, (meta, False))
    assert tag.startswith(b'"3-') and tag.endswith(b'"') and b"," not in tag


def test_byte_tags_are_digests() -> None:
    tagger = etags.Tagger("fp")
    body = b'{"a": 1}'
    assert tagger.of_bytes(body) == tagger.of_bytes(bytes(body)) == tagger.of_bytes(body)
    assert tagger.of_bytes(body) != tagger.of_bytes(b'{"a": 2}')


@pytest.mark.parametrize(
    ("header", "held_back"),
    [
        (b'"1-ab"', True),
        (b'W/"1-ab"', True),
        (b"*", True),
        (b' "0-aa" , "1-ab"', True),
        (b'"1-ac"', False),
        (b'"0-aa", "2-ab"', False),
        (b"", False),
    ],
)
def test_if_none_match(header: bytes, held_back: bool) -> None:
    assert etags.none_match(header, b'"1-ab"') is held_back


def test_opaque() -> None:
    assert etags.opaque(b'"1-ab"') == etags.opaque(b"1-ab") == etags.opaque(b'W/"1-ab"') == b"1-ab"
