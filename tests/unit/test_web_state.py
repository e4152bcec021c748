"""The typed application state (web/state.py): fragments keyed by their class."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from starlette.requests import Request

from cloudseed.web.state import fragment_of, lifespan_state


@dataclass(frozen=True)
class Counter:
    start: int


@dataclass(frozen=True)
class Greeting:
    text: str


def request_with(state: dict[str, object]) -> Request:
    # Starlette's server copies the lifespan's state into each request's scope like this.
    return Request({"type": "http", "state": dict(state)})


def test_each_fragment_is_read_by_its_class() -> None:
    request = request_with(lifespan_state(Counter(start=3), Greeting(text="hi")))
    assert fragment_of(request, Counter) == Counter(start=3)
    assert fragment_of(request, Greeting).text == "hi"


def test_a_fragment_the_app_did_not_build_is_a_lookup_error() -> None:
    request = request_with(lifespan_state(Counter(start=3)))
    with pytest.raises(LookupError, match="built no Greeting"):
        fragment_of(request, Greeting)


def test_two_fragments_of_one_class_are_refused() -> None:
    with pytest.raises(ValueError, match="two state fragments"):
        lifespan_state(Counter(start=1), Counter(start=2))
