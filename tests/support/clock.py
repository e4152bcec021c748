"""A clock a test moves on by hand, for what src times with an injectable ``clock`` (a TTL,
a check interval, a back-off): the test advances it instead of sleeping."""

from __future__ import annotations


class ManualClock:
    """Seconds, like ``time.monotonic``; starts at an arbitrary point, moves only when told."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
