"""Hypothesis strategies for hostile requests: values valid under the JSON Schemas the API
declares, the same with one part swapped for something hostile, and a JSON writer that can
send what ``json.dumps`` cannot (5,000-digit numbers, lone surrogates, deep nesting).

``from_schema`` covers the keywords cloudseed's schemas use (type, enum, properties, required,
additionalProperties, patternProperties, min/maxProperties, items, oneOf, pattern, min/maxLength,
minimum, format). hypothesis-jsonschema would do this, but its last release (0.23.1) fails
with the pinned hypothesis ("'many' object has no attribute 'more'").
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st


@dataclass(frozen=True)
class Raw:
    """JSON text sent as it is (a number Python will not print, a nesting it cannot)."""

    text: str


def dumps(value: Any) -> str:
    """JSON text for ``value``: as ``json.dumps``, plus ``Raw`` and lone surrogates
    (escaped as ``\\ud800``, as an attacker's client would send them)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{dumps(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "1e999" if value > 0 else ("-1e999" if value < 0 else "NaN")
    return json.dumps(value)


BIG_DIGITS = "1" * 5000
HOSTILE_STRINGS = [
    "\ud800",
    "a\udfffb",
    "\x00",
    "nul\x00inside",
    "\x7f\x1b[31m",
    "\u202e\u200b\ufeff",
    "\U0001f4a5" * 300,
    "x" * 70000,
    "",
    " ",
    " lead",
    "trail ",
    "../../../etc/passwd",
    "%00%ff",
    "null",
    "0",
    "-1",
    " 1",
    "1.5",
    "1e3",
    "0x10",
    BIG_DIGITS,
    "-" + BIG_DIGITS,
    "NaN",
    "2.1",
    "compute latest",
]
HOSTILE_NUMBERS: list[Any] = [
    0,
    -1,
    -(2**63),
    2**63,
    2**64,
    10**100,
    1.5,
    -0.0,
    1e308,
    float("inf"),
    Raw(BIG_DIGITS),
    Raw("-" + BIG_DIGITS),
    Raw("1e99999"),
    Raw("-1e-99999"),
    Raw("1." + BIG_DIGITS),
]
HOSTILE_OTHERS: list[Any] = [
    None,
    True,
    False,
    [],
    {},
    [None],
    {"": None},
    Raw("[" * 5000 + "]" * 5000),
    Raw('{"a":' * 2000 + "1" + "}" * 2000),
]
HOSTILE: list[Any] = HOSTILE_STRINGS + HOSTILE_NUMBERS + HOSTILE_OTHERS


def hostile() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(HOSTILE),
        st.text(max_size=40),
        st.integers(0xD800, 0xDFFF).map(chr),  # a lone surrogate
        st.integers(),
        st.floats(),
    )


FORMATS: dict[str, st.SearchStrategy[str]] = {
    "name": st.text(st.characters(categories=["L", "N", "P"]), min_size=1, max_size=20),
    "base64": st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode()),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
}


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if kind is None:
        return ["object"] if "properties" in schema else ["string", "integer", "null", "object"]
    return [kind] if isinstance(kind, str) else list(kind)


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), min(schema.get("maxLength", 30), 30)
    if "pattern" in schema:
        text = st.from_regex(schema["pattern"], fullmatch=True)
        return text.filter(lambda s: low <= len(s) <= schema.get("maxLength", 1 << 30))
    fmt = schema.get("format")
    if fmt in FORMATS:
        return FORMATS[fmt]
    return st.text(min_size=low, max_size=max(low, high))


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values the schema (mostly) accepts."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "oneOf" in schema:
        rest = {k: v for k, v in schema.items() if k != "oneOf"}
        return st.one_of([from_schema({**rest, **s}) for s in schema["oneOf"]])
    options: list[st.SearchStrategy[Any]] = []
    for kind in _types(schema):
        if kind == "string":
            options.append(_string(schema))
        elif kind == "integer":
            options.append(st.integers(min_value=schema.get("minimum"), max_value=5))
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "null":
            options.append(st.none())
        elif kind == "array":
            options.append(st.lists(from_schema(schema.get("items", {})), max_size=3))
        elif kind == "object":
            options.append(_object(schema))
    return st.one_of(options)


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props: dict[str, Any] = schema.get("properties", {})
    required = [k for k in schema.get("required", []) if k in props]
    optional = {k: from_schema(v) for k, v in props.items() if k not in required}
    base = st.fixed_dictionaries(
        {k: from_schema(props[k]) for k in required},
        optional=optional,
    )
    patterns = schema.get("patternProperties", {})
    if not patterns:
        return base
    (pattern, value_schema), *_ = patterns.items()
    extra = st.dictionaries(
        st.from_regex(pattern, fullmatch=True),
        from_schema(value_schema),
        min_size=schema.get("minProperties", 0),
        max_size=schema.get("maxProperties", 3),
    )
    return st.tuples(base, extra).map(lambda pair: {**pair[1], **pair[0]})


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _leaves(v, (*path, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], tuple(rest), new)}
    copy = list(value)
    copy[head] = _replace(copy[head], tuple(rest), new)
    return copy


@st.composite
def spoiled(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    """A valid value with one part (or a new key) made hostile, now and then left intact."""
    value = draw(valid)
    how = draw(st.sampled_from(["intact", "replace", "replace", "add"]))
    if how == "intact":
        return value
    paths = _leaves(value)
    path = draw(st.sampled_from(paths[1:] or paths))  # the whole body now and then only
    if how == "add":
        containers = [p for p in paths if isinstance(_at(value, p), dict)]
        if containers:
            where = draw(st.sampled_from(containers))
            key = draw(st.sampled_from(["\ud800", "x" * 300, "", "max_count", "metadata"]))
            return _replace(value, where, {**_at(value, where), key: draw(hostile())})
    return _replace(value, path, draw(hostile()))


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value
