"""Request bodies and query strings: read, parse and check them against JSON Schema the way
Nova does, so clients get Nova's messages.

Nova validates with jsonschema's Draft 2020-12 validator and reports the best-matching error as
"Invalid input for field/attribute <name>. Value: <value>. <reason>" (query strings: "Invalid
input for query parameters ..."), or the bare reason when the error is at the top level.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import jsonschema
from starlette.requests import Request

from cloudseed.errors import InvalidInput
from cloudseed.web.errors import (
    InvalidName,
    InvalidUserData,
    MalformedRequestBody,
    RequestTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)
from cloudseed.web.gzip_stream import gzip_problem, is_gzip
from cloudseed.web.schema_fastpath import Accept, compile_accepting

JSON_TYPES = ("application/json", "application/vnd.openstack.compute+json")


FORMAT_CHECKER = jsonschema.FormatChecker()
NAME_REASON = "printable characters. Can not start or end with whitespace."


@FORMAT_CHECKER.checks("base64", raises=(binascii.Error, ValueError))
def _check_base64(instance: object) -> bool:
    # Nova's check: Python's lenient decoder (characters outside the alphabet are skipped),
    # so only bad padding and non-ASCII text fail.
    if isinstance(instance, str):
        base64.b64decode(instance.encode("ascii"))
    return True


@FORMAT_CHECKER.checks("gzip-if-gzip", raises=InvalidUserData)
def _check_gzip_if_gzip(instance: object) -> bool:
    # Beside "base64" (which words a bad value as Nova does): where the bytes start like gzip,
    # a whole gzip stream (web/gzip_stream.py), since the guest could read nothing else.
    if isinstance(instance, str):
        try:
            data = base64.b64decode(instance.encode("ascii"))
        except (binascii.Error, ValueError):
            return True  # the "base64" format reports it
        if is_gzip(data) and (problem := gzip_problem(data)) is not None:
            raise InvalidUserData(
                f"Invalid input for field/attribute user_data. The user data starts like "
                f"gzip but is not a gzip stream: {problem}."
            )
    return True


def _is_printable(char: str) -> bool:
    # Nova's rule: no "other" (control, format, unassigned) and no separator but plain spaces.
    category = unicodedata.category(char)
    return not category.startswith("C") and (not category.startswith("Z") or category == "Zs")


@FORMAT_CHECKER.checks("name", raises=InvalidName)
def _check_name(instance: object) -> bool:
    if not isinstance(instance, str):
        return True  # the "type" keyword reports it
    if instance and (
        instance[0].isspace()
        or instance[-1].isspace()
        or not all(_is_printable(c) for c in instance)
    ):
        raise InvalidName(f"An invalid 'name' value was provided. The name must be: {NAME_REASON}")
    return True


# Schemas are module-level constants; keeping the schema in the value pins its id.
_VALIDATORS: dict[
    int, tuple[Mapping[str, Any], jsonschema.Draft202012Validator, Accept | None]
] = {}


def _validator(
    schema: Mapping[str, Any],
) -> tuple[Mapping[str, Any], jsonschema.Draft202012Validator, Accept | None]:
    entry = _VALIDATORS.get(id(schema))
    if entry is None:
        entry = (
            schema,
            jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER),
            compile_accepting(schema, FORMAT_CHECKER),
        )
        _VALIDATORS[id(schema)] = entry
    return entry


def validate(schema: Mapping[str, Any], instance: Any, *, query: bool = False) -> None:
    _, validator, accept = _validator(schema)
    if accept is not None and accept(instance):
        return  # certainly valid (web/schema_fastpath.py); jsonschema words any error
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return
    if isinstance(error.cause, (InvalidName, InvalidUserData)):
        raise ValidationFailed(str(error.cause))
    if error.path:
        if query:
            detail = (
                f"Invalid input for query parameters {error.path[0]}. "
                f"Value: {_show(error.instance)}. {error.message}"
            )
        else:
            detail = (
                f"Invalid input for field/attribute {error.path[-1]}. "
                f"Value: {_show(error.instance)}. {error.message}"
            )
    else:
        detail = error.message
    raise ValidationFailed(detail)


def _show(value: Any) -> str:
    # Nova formats the value with Python's %s; None, True and dicts print the Python way.
    return str(value)


async def read_json(request: Request, *, max_size: int) -> Any:
    """The request body as JSON, enforcing size and Content-Type like Nova.

    Nova treats a missing, empty or text/plain Content-Type as JSON (many clients send none),
    and refuses anything else that is not a JSON type with 415.
    """
    content_type = request.headers.get("content-type")
    if content_type is not None:
        media_type = content_type.split(";", 1)[0].strip().lower()
        if media_type not in ("", "text/plain", *JSON_TYPES):
            raise UnsupportedMediaType()
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and (len(declared) > 20 or int(declared) > max_size)
    ):
        raise RequestTooLarge()
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_size:
            raise RequestTooLarge()
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        return {}
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise MalformedRequestBody() from exc
    check_text(parsed)
    return parsed


# A lone surrogate: JSON's "\\ud800" escape decodes to one, and no UTF-8 encoder (database
# drivers, the password's encryption, log handlers) accepts it.
_SURROGATE = re.compile("[\ud800-\udfff]")
# A NUL ("\\u0000", "%00"): PostgreSQL can neither store nor compare text holding one (psycopg
# refuses to send it: a 500), SQLite and MariaDB can. Refused on every backend, so that a
# request gets the same answer whatever the database.
NUL = "\x00"


def has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def text_problem(text: str) -> str | None:
    """Why a client's string cannot be taken as it is; None: it can."""
    if NUL in text:
        return "The value contains a NUL character, which cannot be stored."
    if has_surrogate(text):
        return "The value is not valid Unicode: it contains a lone surrogate."
    return None


def check_text(document: Any) -> None:
    """Every key and string of a parsed JSON document (or of a query) is valid Unicode (scalar
    values only) without a NUL, or ValidationFailed (400) names the first field that is not.
    Iterative: a deeply nested document costs no recursion."""
    stack: list[tuple[str | None, Any]] = [(None, document)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, str):
            if (problem := text_problem(value)) is not None:
                raise _refused(name, problem)
        elif isinstance(value, dict):
            for key, item in value.items():
                if (problem := text_problem(key)) is not None:
                    raise _refused(None, problem)
                stack.append((key, item))
        elif isinstance(value, list):
            stack.extend((name, item) for item in value)


def _refused(name: str | None, reason: str) -> ValidationFailed:
    if name is None:
        return ValidationFailed(f"Invalid input: a key or value cannot be taken. {reason}")
    return ValidationFailed(f"Invalid input for field/attribute {name}. {reason}")


# Client-supplied integers are bounded before conversion: int() of a digit string costs
# quadratic time and refuses more than 4,300 digits (ValueError, which was a 500). Nothing a
# client may send needs more than a 64-bit integer: Nova's database columns are at most that.
MAX_INT = 2**63 - 1
MIN_INT = -(2**63)
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_MAX_INT_TEXT = 32  # characters: leading zeros and a sign are allowed, and nothing longer


def bounded_int(value: object, name: str, *, minimum: int = MIN_INT, maximum: int = MAX_INT) -> int:
    """``value`` (an int, or a string of decimal digits as Nova's schemas allow) as an int
    within ``minimum``..``maximum``, or InvalidInput with Nova's ``validate_integer`` messages.
    A string longer than 32 characters never reaches int()."""
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if _INT_TEXT.fullmatch(text) is None:
            raise InvalidInput(f"{name} must be an integer")
        if len(text) > _MAX_INT_TEXT:
            # Digits enough to pass any bound: say which one, without converting them.
            raise InvalidInput(
                f"{name} must be >= {minimum}" if text[0] == "-" else f"{name} must be <= {maximum}"
            )
        number = int(text)
    else:
        raise InvalidInput(f"{name} must be an integer")
    if number < minimum:
        raise InvalidInput(f"{name} must be >= {minimum}")
    if number > maximum:
        raise InvalidInput(f"{name} must be <= {maximum}")
    return number


def query_lists(request: Request) -> dict[str, list[str]]:
    """The query string as Nova's schemas expect it: every parameter a list of values."""
    result: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        result.setdefault(key, []).append(value)
    check_text(result)
    return result
