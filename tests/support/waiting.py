"""The one way a test waits: for observable state, never for a fixed time.

``wait_until`` polls a check until it holds (or returns something truthy) and fails with a
message naming what never happened. A test that must show that something does *not* happen
waits for a later event that proves the first one had its chance (a marker request answered,
a generation reached), not a bare ``time.sleep``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Generous: CI's 2 cores run two test workers, servers and databases at once.
DEFAULT_TIMEOUT = 20.0


def wait_until(
    check: Callable[[], T | None],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.01,
    max_interval: float = 0.2,
    what: str = "the condition",
) -> T:
    """Call ``check()`` until it returns something truthy, and return that; raise
    ``AssertionError`` naming ``what`` after ``timeout`` seconds. The interval grows to at
    most ``max_interval`` so a long wait does not spin."""
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout:g} s (last: {result!r})")
        time.sleep(delay)
        delay = min(delay * 1.5, max_interval)


def eventually(check: Callable[..., object], timeout: float = 5) -> float:
    """``wait_until`` for tests that also bound how long a change took to show: it polls
    every 5 ms without backing off, so the time it returns (seconds) is the change's, not the
    poll interval's."""
    started = time.monotonic()
    wait_until(check, timeout=timeout, interval=0.005, max_interval=0.005)
    return time.monotonic() - started
