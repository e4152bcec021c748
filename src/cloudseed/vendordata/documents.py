"""JSON as vendordata needs it: strict parsing, compact bytes, and vendor_data2.json assembly.

Values are kept as compact JSON bytes rather than Python objects: a cached answer then costs
its length and nothing more, and vendor_data2.json is assembled by joining bytes, without
re-encoding what did not change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cloudseed.vendordata.errors import NotJSON

EMPTY_OBJECT = b"{}"


def _refuse_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity by default; cloud-init's parser and most others
    # would then choke on what we serve.
    raise NotJSON(f"{name} is not valid JSON")


def parse(text: bytes | str) -> Any:
    """The JSON value in ``text``; raises NotJSON with the parser's reason."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except NotJSON:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotJSON(str(exc)) from None
    except RecursionError:
        # The parser recurses per level: nesting deeper than the interpreter's recursion
        # limit (about a thousand) is refused as a bad answer, not a crash with a traceback.
        raise NotJSON("nested too deeply") from None


def compact(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except RecursionError:
        raise NotJSON("nested too deeply") from None


def normalise(text: bytes) -> bytes:
    """A JSON text as compact bytes; an empty (or blank) text is ``{}``, as Nova treats it."""
    if not text.strip():
        return EMPTY_OBJECT
    return compact(parse(text))


def join_object(members: Iterable[tuple[str, bytes]]) -> bytes:
    """A JSON object from (key, compact JSON value) pairs, in the order given."""
    return b"{" + b",".join(compact(key) + b":" + value for key, value in members) + b"}"
