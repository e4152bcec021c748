"""A host's guests booting together. When a compute host comes back (a power cut, a
hypervisor upgrade, ``resume_guests_state_on_host_boot``), every guest on it boots within
seconds of the others, and each one's first request is a miss: nothing reported them changed,
so nothing loaded them ahead. Once ``misses`` different guests of one host have missed within
``WINDOW`` seconds, the host is taken to be booting, and its other active instances are worth
loading ahead (guests.py asks loading.py for them and hands them to the store), at most once
per host per window. One guest rebooting alone wakes nothing.

IO-free; called from the store's loading thread, one batch at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

WINDOW = 10.0  # seconds
_PRUNE_AT = 4096  # hosts remembered before the old ones are let go


class HostBoots:
    def __init__(self, misses: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.misses = misses  # 0: never
        self._clock = clock
        self._missed: dict[str, tuple[float, set[str]]] = {}  # host -> (since, uuids)
        self._woken: dict[str, float] = {}  # host -> when
        self._pruned_at = clock()

    def missed(self, host: str | None, uuid: str) -> bool:
        """Count a miss of ``uuid``'s guest on ``host``; True when it is the one that makes
        the host a booting one (its other guests are then to be loaded)."""
        if not host or self.misses <= 0:
            return False
        now = self._clock()
        woken = self._woken.get(host)
        if woken is not None and now - woken < WINDOW:
            return False
        since, uuids = self._missed.get(host, (now, set()))
        if now - since >= WINDOW:
            since, uuids = now, set()
        uuids.add(uuid)
        if len(uuids) < self.misses:
            self._missed[host] = (since, uuids)
            self._prune(now)
            return False
        self._missed.pop(host, None)
        self._woken[host] = now
        self._prune(now)
        return True

    def _prune(self, now: float) -> None:
        """Let go of the hosts whose window is over: when many are remembered, at most once
        a window (each pass is as long as the hosts remembered)."""
        if len(self._missed) + len(self._woken) < _PRUNE_AT or now - self._pruned_at < WINDOW:
            return
        self._pruned_at = now
        self._missed = {h: v for h, v in self._missed.items() if now - v[0] < WINDOW}
        self._woken = {h: t for h, t in self._woken.items() if now - t < WINDOW}
