"""A quick "certainly valid" answer for a JSON Schema, so that valid requests skip jsonschema.

jsonschema walks a schema through generic keyword dispatch, and for a small valid body (a key
pair import) that walk cost more than the database insert. ``compile_accepting`` turns a
schema into nested Python closures that answer one question: is this instance valid? They
only ever answer True when jsonschema would find no error; any doubt answers False, and the
caller then runs jsonschema as before, which finds and words the error (Nova's messages come
from there). So a wrong False costs time, never correctness, and tests/unit/test_schema_fastpath.py
checks both validators agree on generated instances.

Only the keywords cloudseed's schemas use are understood, each as jsonschema 4's Draft 2020-12
implements it. A schema with any other keyword (``oneOf``, ``patternProperties``, ``$ref``, …)
is not compiled at all: ``compile_accepting`` returns None and jsonschema alone decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

Accept = Callable[[Any], bool]

# What jsonschema's Draft 2020-12 type checker calls each JSON type. "integer" and "number"
# leave floats to jsonschema (1.0 is an integer there); bool is never a number.
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, int) and not isinstance(value, bool),
}


class _Unsupported(Exception):
    """A keyword or value this module does not decide: leave the schema to jsonschema."""


def compile_accepting(
    schema: Mapping[str, Any] | bool, format_checker: jsonschema.FormatChecker
) -> Accept | None:
    """A function answering True only for instances ``schema`` accepts, or None when the
    schema uses something this module does not understand."""
    try:
        return _compile(schema, format_checker)
    except _Unsupported:
        return None


def _compile(schema: Mapping[str, Any] | bool, formats: jsonschema.FormatChecker) -> Accept:
    if schema is True:
        return lambda _value: True
    if not isinstance(schema, Mapping):
        raise _Unsupported(schema)  # False, or not a schema
    compiled = (_keyword(name, value, schema, formats) for name, value in schema.items())
    checks = [check for check in compiled if check is not None]
    if not checks:
        return lambda _value: True
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _keyword(
    name: str, value: Any, schema: Mapping[str, Any], formats: jsonschema.FormatChecker
) -> Accept | None:
    if name == "type":
        names = [value] if isinstance(value, str) else list(value)
        if not all(n in _TYPES for n in names):
            raise _Unsupported(value)
        tests = [_TYPES[n] for n in names]
        return lambda instance: any(test(instance) for test in tests)
    if name == "properties":
        compiled = {key: _compile(sub, formats) for key, sub in value.items()}
        return lambda instance: (
            not isinstance(instance, dict)
            or all(check(instance[key]) for key, check in compiled.items() if key in instance)
        )
    if name == "required":
        needed = tuple(value)
        return lambda instance: (
            not isinstance(instance, dict) or all(key in instance for key in needed)
        )
    if name == "additionalProperties":
        if "patternProperties" in schema:
            raise _Unsupported(name)
        known = frozenset(schema.get("properties", {}))
        if value is True:
            return None
        if value is False:
            return lambda instance: not isinstance(instance, dict) or known.issuperset(instance)
        extra = _compile(value, formats)
        return lambda instance: (
            not isinstance(instance, dict)
            or all(extra(item) for key, item in instance.items() if key not in known)
        )
    if name == "items":
        if "prefixItems" in schema:
            raise _Unsupported(name)
        item_check = _compile(value, formats)
        return lambda instance: (
            not isinstance(instance, list) or all(item_check(item) for item in instance)
        )
    if name == "allOf":
        parts = [_compile(sub, formats) for sub in value]
        return lambda instance: all(part(instance) for part in parts)
    if name == "enum":
        # Strings, booleans and null only, each matched within its own kind: Python's 1 ==
        # True == 1.0 is not jsonschema's equality.
        strings = frozenset(item for item in value if isinstance(item, str))
        singletons = [item for item in value if item is None or isinstance(item, bool)]
        return lambda instance: (
            instance in strings
            if isinstance(instance, str)
            else any(instance is item for item in singletons)
        )
    if name == "pattern":
        search = re.compile(value).search  # jsonschema: re.search(pattern, instance)
        return lambda instance: not isinstance(instance, str) or search(instance) is not None
    if name == "minLength":
        return lambda instance: not isinstance(instance, str) or len(instance) >= value
    if name == "maxLength":
        return lambda instance: not isinstance(instance, str) or len(instance) <= value
    if name == "format":
        return lambda instance: formats.conforms(instance, value)
    if name in ("minimum", "maximum"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Unsupported(value)
        bound: int = value
        below = name == "maximum"
        # Floats are left to jsonschema, as for "integer" (an int compared with a float
        # is exact in Python, but not worth the doubt).
        return lambda instance: (
            (not isinstance(instance, int | float) or isinstance(instance, bool))
            or (isinstance(instance, int) and (instance <= bound if below else instance >= bound))
        )
    if name in ("minProperties", "maxProperties"):
        size: int = value
        most = name == "maxProperties"
        return lambda instance: (
            not isinstance(instance, dict)
            or (len(instance) <= size if most else len(instance) >= size)
        )
    raise _Unsupported(name)
