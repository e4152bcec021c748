"""Typed application state: what an app's lifespan opens for every request, read by routes
through typed accessors instead of string keys on ``request.state``.

State comes in fragments, each a frozen dataclass declared by the code that reads it: the
toolkit's own ``WebState`` below (settings and the API database, which every domain needs), and
one per domain that needs more (``servers.api.requests.ServersState``, ...). The app combines
its fragments in one typed object (``api.app.ComputeState``) and its lifespan yields
``lifespan_state(...)`` of them; Starlette copies that into each request's scope, and a route
reads a fragment with ``fragment_of(request, ServersState)``. The fragment's class is the key,
so a misspelt fragment or field is a type error, and no type here names a domain class (the
toolkit sits below the domains).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from starlette.requests import HTTPConnection

from cloudseed.db.engines import Database
from cloudseed.settings import Settings

# The one key of the lifespan state: a read-only map from fragment class to fragment.
STATE_KEY = "cloudseed.fragments"

F = TypeVar("F")


@dataclass(frozen=True)
class WebState:
    """What the toolkit's own accessors read (``web.requests.settings_of``, ``api_db_of``)."""

    settings: Settings
    api_db: Database


def lifespan_state(*fragments: object) -> dict[str, Any]:
    """What a lifespan yields for ``fragments``: one of each class."""
    by_class: dict[type, object] = {type(fragment): fragment for fragment in fragments}
    if len(by_class) != len(fragments):
        raise ValueError("two state fragments of one class")
    return {STATE_KEY: MappingProxyType(by_class)}


def fragment_in(scope: Mapping[str, Any], kind: type[F]) -> F | None:
    """The fragment of class ``kind`` in an ASGI ``scope``'s lifespan state, or None: for
    middleware that sees every request, including those of an app without it (the metrics
    edge)."""
    fragments = scope.get("state", {}).get(STATE_KEY, {})
    fragment = fragments.get(kind)
    return fragment if isinstance(fragment, kind) else None


def fragment_of(connection: HTTPConnection, kind: type[F]) -> F:
    """The lifespan's fragment of class ``kind``; a fragment the app did not build is a
    programming error (the route's domain is not wired into the app), hence a LookupError."""
    fragment = fragment_in(connection.scope, kind)
    if fragment is None:
        raise LookupError(f"the app's lifespan built no {kind.__name__}")
    return fragment
