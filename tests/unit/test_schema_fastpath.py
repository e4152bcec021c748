"""web/schema_fastpath.py: its "certainly valid" answer (fastjsonschema's compiled code) never
accepts what jsonschema refuses, and accepts what jsonschema accepts, for every schema
cloudseed validates with, over instances generated near each schema's edges."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cloudseed
from cloudseed.keypairs import schemas as keypair_schemas
from cloudseed.web.errors import ValidationFailed
from cloudseed.web.schema_fastpath import compile_accepting
from cloudseed.web.validation import FORMAT_CHECKER, validate


def _project_schemas() -> list[tuple[str, Mapping[str, Any]]]:
    found: dict[int, tuple[str, Mapping[str, Any]]] = {}
    for module in pkgutil.walk_packages(cloudseed.__path__, "cloudseed."):
        if not module.name.endswith(".schemas"):
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if isinstance(value, dict) and "type" in value and not name.startswith("_"):
                found.setdefault(id(value), (f"{module.name}.{name}", value))
    return sorted(found.values(), key=lambda item: item[0])


SCHEMAS = _project_schemas()
COMPILED = [(name, schema) for name, schema in SCHEMAS if compile_accepting(schema, FORMAT_CHECKER)]

# Characters that sit on the edges of the schemas' patterns and name rules: allowed ones,
# refused ones, blanks at either end, a control character and a non-ASCII letter.
_CHARS = "aZ09_- .@/:\t\x00é"
_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, 2.5, -1.5])
    | st.text(_CHARS, max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text("ab", max_size=2), inner),
    max_leaves=4,
)


def near(schema: Any) -> st.SearchStrategy[Any]:
    """Instances of ``schema``, often valid, often one step off (a wrong type, a missing or
    extra key, a string one character too long)."""
    if not isinstance(schema, Mapping):
        return _ANY_JSON
    options: list[st.SearchStrategy[Any]] = [_ANY_JSON]
    if "enum" in schema:
        options.append(st.sampled_from(list(schema["enum"])))
    for part in schema.get("allOf", []) + schema.get("oneOf", []):
        options.append(near(part))
    types = schema.get("type", [])
    for kind in [types] if isinstance(types, str) else types:
        options.append(_near_type(kind, schema))
    return st.one_of(*options)


def _near_type(kind: str, schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "string":
        low = max(0, schema.get("minLength", 0) - 1)
        high = min(schema.get("maxLength", 12) + 1, 300)
        edge = st.text(_CHARS, min_size=high, max_size=high) if high > 12 else st.nothing()
        return (
            st.text(_CHARS, min_size=low, max_size=min(high, 12))
            | edge
            | st.sampled_from(["1", "12", "ssh", "x509", "aGk=", "a", "auto", "none"])
        )
    if kind == "integer":
        low, high = schema.get("minimum", -5), schema.get("maximum", 5)
        return (
            st.integers(low - 1, high + 1)
            | st.booleans()
            | st.integers(low - 1, high + 1).map(float)
            | st.just(0.5)
        )
    if kind == "number":
        return st.integers(-5, 5) | st.floats(-5, 5)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(near(schema.get("items", {})), max_size=3)
    if kind == "object":
        properties = schema.get("properties", {})
        fields = st.fixed_dictionaries(
            {}, optional={key: near(sub) for key, sub in properties.items()}
        )
        extra = st.dictionaries(st.sampled_from(["zz", "user_id", "name"]), _ANY_JSON, max_size=1)
        return st.builds(lambda a, b: {**b, **a}, fields, extra | st.just({}))
    return _ANY_JSON


_PAIRS: dict[str, tuple[Any, jsonschema.Draft202012Validator]] = {}
_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {}


def _pair(name: str, schema: Mapping[str, Any]) -> tuple[Any, jsonschema.Draft202012Validator]:
    if name not in _PAIRS:
        accept = compile_accepting(schema, FORMAT_CHECKER)
        assert accept is not None
        _PAIRS[name] = (
            accept,
            jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER),
        )
    return _PAIRS[name]


def _near_cached(name: str, schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    return _STRATEGIES.setdefault(name, near(schema))


@pytest.mark.parametrize(("name", "schema"), COMPILED, ids=[name for name, _ in COMPILED])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_agrees_with_jsonschema(name: str, schema: Mapping[str, Any], data: st.DataObject) -> None:
    instance = data.draw(_near_cached(name, schema))
    accept, validator = _pair(name, schema)
    valid = validator.is_valid(instance)
    if accept(instance):
        assert valid, f"{name} accepted what jsonschema refuses: {instance!r}"
    else:
        assert not valid, f"{name} sent a valid instance to jsonschema: {instance!r}"


def test_every_project_schema_compiles() -> None:
    left_out = [name for name, schema in SCHEMAS if all(schema is not s for _, s in COMPILED)]
    assert left_out == []
    assert len(COMPILED) >= 40
    assert all(
        compile_accepting(schema, FORMAT_CHECKER) is not None
        for schema in (
            keypair_schemas.CREATE_V21,
            keypair_schemas.CREATE_V22,
            keypair_schemas.CREATE_V210,
            keypair_schemas.CREATE_V292,
        )
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"items": {"type": "string"}, "prefixItems": [{"type": "integer"}]},
        {"type": "object", "properties": {"a": {"unevaluatedProperties": False}}},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"type": "array", "items": [{"type": "integer"}]},
        {"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x"},
        {"type": "widget"},
    ],
)
def test_what_draft_7_reads_otherwise_is_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_accepting(schema, FORMAT_CHECKER) is None


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer"}, True),  # bool is not an integer in JSON Schema
        ({"type": "number"}, False),
        ({"enum": [1]}, True),  # 1 == True in Python, not in JSON Schema
        ({"enum": ["a"]}, None),
        ({"type": "object", "additionalProperties": {"type": "string"}}, {"a": 1}),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": False}, {"b": 1}),
        ({"type": "object", "required": ["a"]}, {}),
        ({"type": "string", "pattern": "^a"}, "ba"),
        ({"type": "string", "format": "name"}, " leading blank"),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 1}, [1, 2]),
    ],
)
def test_refused_instances_are_not_accepted(schema: dict[str, Any], instance: Any) -> None:
    accept = compile_accepting(schema, FORMAT_CHECKER)
    assert accept is None or not accept(instance)


def test_integral_floats_are_integers_as_in_jsonschema() -> None:
    accept = compile_accepting({"type": "integer", "minimum": 1}, FORMAT_CHECKER)
    assert accept is not None
    assert accept(2.0)
    assert not accept(2.5)
    validate({"type": "integer", "minimum": 1}, 2.0)  # jsonschema: 2.0 is an integer


def test_errors_still_carry_novas_messages() -> None:
    body = {"keypair": {"name": "bad name!", "public_key": "x"}}
    with pytest.raises(ValidationFailed) as caught:
        validate(keypair_schemas.CREATE_V210, body)
    assert str(caught.value).startswith("Invalid input for field/attribute name. Value: bad name!")
