"""What DynamicJSON target calls report (metrics/ counts it; without metrics nothing does)."""

from __future__ import annotations

from typing import Protocol


class TargetStats(Protocol):
    def target_called(self, target: str, seconds: float, *, failed: bool) -> None:
        """One call of ``target`` took ``seconds``; ``failed``: it raised TargetFailure."""


class NoTargetStats:
    def target_called(self, target: str, seconds: float, *, failed: bool) -> None:
        pass


NO_TARGET_STATS = NoTargetStats()
