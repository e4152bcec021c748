"""What a target's ``Cache-Control`` header allows us to do with its answer (RFC 9111, the part a
cache of POST answers keyed on the request body needs).

- ``no-store``: never keep the answer.
- ``max-age=N``: fresh for N seconds; no call at all meanwhile.
- ``no-cache``, ``max-age=0`` or no max-age: keep the answer (for ETag revalidation and as a
  fallback when the target fails) but ask the target again each time.
- ``must-revalidate``: once stale, the answer may not stand in for a failed call.

Everything else (``private``, ``public``, ``s-maxage``, extensions) is ignored, as is
``Expires``: targets are written for this protocol and ``max-age`` says it without clocks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# RFC 9111 5.2: a delta-seconds value too large to represent is taken as 2^31.
MAX_DELTA_SECONDS = 2**31


@dataclass(frozen=True, slots=True)
class CachePolicy:
    store: bool = True
    max_age: int = 0  # seconds the answer is fresh; 0 = revalidate every time
    stale_if_error: bool = True  # may stand in for a failed call once stale


REVALIDATE_EACH_TIME = CachePolicy()


def _delta_seconds(value: str) -> int | None:
    value = value.strip().strip('"')
    if not (value.isascii() and value.isdigit()):
        return None  # a malformed max-age counts as absent: revalidate
    if len(value) > 10:  # bounded before int(): RFC 9111 caps it at 2**31 anyway
        return MAX_DELTA_SECONDS
    return min(int(value), MAX_DELTA_SECONDS)


def parse_cache_control(headers: Iterable[str]) -> CachePolicy:
    """The policy from every ``Cache-Control`` header line of one response."""
    directives: dict[str, str | None] = {}
    for line in headers:
        for part in line.split(","):
            name, equals, value = part.partition("=")
            name = name.strip().lower()
            if name:
                directives.setdefault(name, value if equals else None)
    if "no-store" in directives:
        return CachePolicy(store=False, max_age=0, stale_if_error=False)
    max_age = 0
    if "no-cache" not in directives and directives.get("max-age") is not None:
        max_age = _delta_seconds(directives["max-age"] or "") or 0
    return CachePolicy(
        store=True, max_age=max_age, stale_if_error="must-revalidate" not in directives
    )
