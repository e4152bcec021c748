"""What the guest cache and the change feed report as they work (metrics/ counts it; without
metrics nothing does). IO-free: plain calls, so the cache's hot path stays a dict hit plus a
call to a method that does nothing or bumps one counter."""

from __future__ import annotations

from typing import Protocol


class StoreStats(Protocol):
    def hit(self) -> None:
        """A request's guest was in this worker's cache."""

    def missed(self) -> None:
        """A request's guest was not cached and had to be loaded (or waited for a load)."""

    def cached(self, guests: int) -> None:
        """The cache now holds ``guests`` guests."""

    def change_lag(self, seconds: float) -> None:
        """A change was read from the feed ``seconds`` after its writer stamped it."""


class NoStats:
    """Nobody is counting."""

    def hit(self) -> None:
        pass

    def missed(self) -> None:
        pass

    def cached(self, guests: int) -> None:
        pass

    def change_lag(self, seconds: float) -> None:
        pass


NO_STATS = NoStats()
