"""The directory the workers of ``cloudseed serve --workers N`` keep their metric values in.

The serve parent makes a fresh private directory before forking, names it in
``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's workers find it there, and the workers
inherit it), removes the live gauges of a worker that died (its counters stay: totals never go
back) and removes the whole directory when serving stops, so a restart starts from zero and
never reads a previous run's files.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from prometheus_client.multiprocess import mark_process_dead

ENV = "PROMETHEUS_MULTIPROC_DIR"


class MultiprocessDirectory:
    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="cloudseed-metrics-")  # mode 0700
        self._previous = os.environ.get(ENV)
        os.environ[ENV] = self.path

    def worker_died(self, pid: int) -> None:
        mark_process_dead(pid, self.path)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._previous
