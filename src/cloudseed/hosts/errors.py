"""Compute host errors.

ServiceUnavailable ── NoValidHost   no enabled, live host has room (recorded as the
                                    instance's fault; the instance goes to ERROR)
"""

from __future__ import annotations

from cloudseed.errors import ServiceUnavailable


class NoValidHost(ServiceUnavailable):
    def __init__(self, reason: str = "There are not enough hosts available.") -> None:
        super().__init__(f"No valid host was found. {reason}")
