"""web/validation.bounded_int and check_text: the edge's rules for integers and strings."""

from __future__ import annotations

import pytest

from cloudseed.errors import InvalidInput
from cloudseed.web.errors import ValidationFailed
from cloudseed.web.microversions import APIVersion
from cloudseed.web.validation import MAX_INT, bounded_int, check_text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1), ("1", 1), (" 7 ", 7), ("-1", -1), ("00000000000000000000001", 1), (MAX_INT, MAX_INT)],
)
def test_accepted(value: object, expected: int) -> None:
    assert bounded_int(value, "n", minimum=-1) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9" * 5000, "n must be <= 9223372036854775807"),
        ("-" + "9" * 5000, "n must be >= -1"),
        ("9" * 20, "n must be <= 9223372036854775807"),
        ("0", None),
        ("-2", "n must be >= -1"),
        ("1.5", "n must be an integer"),
        ("\u00b2", "n must be an integer"),
        ("", "n must be an integer"),
        (True, "n must be an integer"),
        (None, "n must be an integer"),
    ],
)
def test_refused(value: object, message: str | None) -> None:
    if message is None:
        with pytest.raises(InvalidInput, match="n must be >= 1"):
            bounded_int(value, "n", minimum=1)
        return
    with pytest.raises(InvalidInput) as caught:
        bounded_int(value, "n", minimum=-1)
    assert caught.value.message == message


def test_check_text_finds_surrogates_anywhere() -> None:
    check_text({"a": ["b", {"c": "d\u00e9\U0001f600"}], "e": 1})
    for document in ({"a": "\ud800"}, {"\udfff": 1}, [[["x\udc00"]]], "\ud800"):
        with pytest.raises(ValidationFailed):
            check_text(document)
    deep: object = "\ud800"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValidationFailed):
        check_text(deep)  # iterative: no RecursionError


def test_check_text_finds_nul_anywhere() -> None:
    for document in ({"a": "b\x00"}, {"\x00": 1}, [[["\x00x"]]], "\x00"):
        with pytest.raises(ValidationFailed, match="NUL"):
            check_text(document)
    with pytest.raises(ValidationFailed) as caught:
        check_text({"metadata": {"role": "a\x00b"}})
    assert "field/attribute role" in caught.value.message


def test_version_numbers_are_bounded() -> None:
    with pytest.raises(InvalidInput):
        APIVersion.parse("2." + "1" * 5000)
    assert APIVersion.parse("2.999999999") == APIVersion(2, 999999999)
