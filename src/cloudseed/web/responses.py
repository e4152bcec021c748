"""The compute API's JSON response: Starlette's, encoded with orjson.

The standard library encoder was the largest single cost of a big body (a list of 100 key
pairs, a server). orjson writes the same bytes for what the views build (dicts, lists, str,
int, bool, None): keys in insertion order, no spaces, UTF-8 not escaped to ``\\uXXXX``, the
same as Starlette's ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``.

Where orjson would differ or refuse (an int beyond 64 bits, a float NaN, a non-str key, a
dataclass or datetime that json.dumps rejects), the body goes through Starlette's encoder
instead, so such a value behaves exactly as it did: encoded the same way, or refused the same
way.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from starlette.responses import JSONResponse as _StarletteJSONResponse


def _refuse(value: Any) -> Any:
    # orjson calls this only for types it has no native encoding for: not ours to guess.
    raise TypeError


class JSONResponse(_StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            body = orjson.dumps(
                content,
                default=_refuse,
                option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS,
            )
        except (orjson.JSONEncodeError, TypeError):
            return super().render(content)
        if b"null" in body and _has_non_finite(content):
            # orjson writes NaN and infinities as null; json.dumps(allow_nan=False) refuses.
            return super().render(content)
        return body


def _has_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in ``value``. A loop over a stack rather than
    recursion: it runs whenever a body holds a null, and a recursive walk over a detailed
    server list (thousands of values) cost several times orjson's own encoding."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return False
