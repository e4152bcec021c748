"""web/responses.py: orjson writes exactly the bytes Starlette's json.dumps wrote, and whatever
orjson would write differently is left to Starlette's encoder (encoded or refused as before)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.responses import JSONResponse as StarletteJSONResponse

from cloudseed.web.responses import JSONResponse

# What views build: dicts with str keys, lists, str (any code point but lone surrogates),
# 64-bit ints, finite floats, bools and None.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]))
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def both(content: Any) -> tuple[bytes, bytes]:
    return bytes(JSONResponse(content).body), bytes(StarletteJSONResponse(content).body)


@given(documents)
def test_same_bytes_as_starlette(content: Any) -> None:
    ours, theirs = both(content)
    if ours != theirs:
        # The only licensed difference: a float's spelling (orjson "1e16", json "1e+16"),
        # the same number either way.
        assert _has_float(content), (ours, theirs)
        assert json.loads(ours) == json.loads(theirs)


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return isinstance(value, list) and any(_has_float(v) for v in value)


def test_key_order_unicode_and_slashes_as_nova_clients_see_them() -> None:
    content = {"z": 1, "a": "é ✓ </script>", "m": [True, None, "\u2028"]}
    ours, theirs = both(content)
    assert ours == theirs == '{"z":1,"a":"é ✓ </script>","m":[true,null,"\u2028"]}'.encode()


@pytest.mark.parametrize(
    "content",
    [
        {"big": 2**70},  # beyond 64 bits: orjson refuses, json writes it
        {1: "int key"},  # json writes "1"; orjson refuses non-str keys
        ("a", "tuple"),
    ],
)
def test_what_orjson_refuses_is_encoded_as_before(content: Any) -> None:
    ours, theirs = both(content)
    assert ours == theirs


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "content",
    [
        {"x": float("nan")},
        {"x": [1.0, float("inf")]},
        {"a": [None, {"b": ("c", {"d": float("-inf")})}]},  # deep, inside a tuple
        {"when": dt.datetime(2026, 1, 1)},
        {"p": Point(1)},
    ],
)
def test_what_json_refused_is_still_refused(content: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        StarletteJSONResponse(content)
    with pytest.raises((ValueError, TypeError)):
        JSONResponse(content)
