"""A quick "certainly valid" answer for a JSON Schema, so that valid requests skip jsonschema.

jsonschema walks a schema through generic keyword dispatch, and for a small valid body (a key
pair import) that walk cost more than the database insert. fastjsonschema compiles a schema
into Python code once; ``compile_accepting`` uses it to answer one question: is this instance
valid? True only when the compiled code finds nothing; otherwise the caller runs jsonschema as
before, which finds and words the error (Nova's messages come from there). So the compiled
check never decides an error, and tests/unit/test_schema_fastpath.py holds its verdicts to
jsonschema's.

fastjsonschema implements drafts 4 to 7; cloudseed's schemas are Draft 2020-12 (as Nova's).
Where the two drafts differ, a draft-7 compiler would skip a keyword 2020-12 enforces, so a
schema naming any of those keywords anywhere is not compiled at all (None: jsonschema alone
decides). Formats are checked by the same ``FormatChecker`` jsonschema uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
import jsonschema

Accept = Callable[[Any], bool]

# Keywords whose meaning Draft 2020-12 added or changed since draft 7.
_NOT_IN_DRAFT_7 = frozenset(
    {
        "$anchor",
        "$defs",
        "$dynamicAnchor",
        "$dynamicRef",
        "$recursiveAnchor",
        "$recursiveRef",
        "$schema",
        "$vocabulary",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "maxContains",
        "minContains",
        "prefixItems",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


def compile_accepting(
    schema: Mapping[str, Any] | bool, format_checker: jsonschema.FormatChecker
) -> Accept | None:
    """A function answering True only for instances ``schema`` accepts, or None when the
    schema is one to leave to jsonschema."""
    if not isinstance(schema, Mapping) or _differs_in_draft_7(schema):
        return None
    formats = {
        name: (lambda value, name=name: format_checker.conforms(value, name))
        for name in format_checker.checkers
    }
    try:
        check = fastjsonschema.compile(dict(schema), formats=formats)
    except fastjsonschema.JsonSchemaDefinitionException:
        return None

    def accept(instance: Any) -> bool:
        try:
            check(instance)
        except Exception:  # refused, or anything unexpected: jsonschema decides
            return False
        return True

    return accept


def _differs_in_draft_7(node: Any) -> bool:
    """Whether ``node`` names a keyword draft 7 reads otherwise (anywhere, property names
    included: a false alarm only costs speed), or uses ``items`` as a list (2020-12's
    ``prefixItems``)."""
    if isinstance(node, Mapping):
        if any(key in _NOT_IN_DRAFT_7 for key in node):
            return True
        if isinstance(node.get("items"), list):
            return True
        return any(_differs_in_draft_7(value) for value in node.values())
    if isinstance(node, list):
        return any(_differs_in_draft_7(value) for value in node)
    return False
