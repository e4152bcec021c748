"""One pass of housekeeping repeated in a daemon thread until stopped: the compute agent's
image cache and console mirror, the console log rotator, the host key console watch.

A pass that raises is logged and the next one tries again (a database outage ends by itself);
``stop`` wakes the thread at once instead of waiting out the interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self,
        work: Callable[[], object],
        *,
        interval: float,
        name: str,
        failure: str,
        first_pass_at_once: bool = True,
    ) -> None:
        """``work`` every ``interval`` seconds in a thread called ``name``; ``failure`` is the
        log line of a pass that raised. The first pass runs at start, or after one interval
        (``first_pass_at_once=False``); with an interval of 0 or less, only that one pass."""
        self.work = work
        self.interval = interval
        self.name = name
        self.failure = failure
        self.first_pass_at_once = first_pass_at_once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread (once; again after ``stop``)."""
        with self._lock:
            if self.running:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = 10) -> None:
        """Stop after the pass under way, waiting up to ``timeout`` seconds for it."""
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout=timeout)

    def _run(self) -> None:
        if not self.first_pass_at_once and self._stop.wait(self.interval):
            return
        while True:
            try:
                self.work()
            except Exception:
                log.exception(self.failure)
            if self.interval <= 0 or self._stop.wait(self.interval):
                return
