"""Measuring hooks for the processes of ``cloudseed nova-metadata`` in bench/nova_dropin.py:
Python imports this file at start when its directory is on ``PYTHONPATH``; it does nothing
unless one of its variables is set.

- ``NOVA_DROPIN_COUNT_DIR``: a listener on every SQLAlchemy engine counts the statements sent
  (``before_cursor_execute``) by database name, and a thread writes them to
  ``<dir>/<pid>.json`` twice a second. A forked worker starts from zero with a writer of its
  own (threads do not survive a fork). Pool pre-pings are no cursor statements and are not
  counted; the database's own transaction counts (pg_stat_database) see them.
- ``NOVA_DROPIN_PROFILE``: SIGUSR1 starts cProfile in the main thread (a one-worker service
  serves there), the next SIGUSR1 stops it and writes its statistics to that file.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

_COUNT_DIRECTORY = os.environ.get("NOVA_DROPIN_COUNT_DIR")
_PROFILE = os.environ.get("NOVA_DROPIN_PROFILE")
_counts: dict[str, int] = {}


def _count(conn: Any, *_args: Any) -> None:
    name = str(conn.engine.url.database or "?").rsplit("/", 1)[-1]
    _counts[name] = _counts.get(name, 0) + 1


def _write_forever(directory: Path) -> None:
    while True:
        path = directory / f"{os.getpid()}.json"
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(_counts))
        temporary.replace(path)
        time.sleep(0.5)


def _start_writer() -> None:
    assert _COUNT_DIRECTORY is not None
    threading.Thread(
        target=_write_forever,
        args=(Path(_COUNT_DIRECTORY),),
        name="statement-counter",
        daemon=True,
    ).start()


def _in_child() -> None:
    _counts.clear()
    _start_writer()


if _COUNT_DIRECTORY:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", _count)
    os.register_at_fork(after_in_child=_in_child)
    _start_writer()

if _PROFILE:
    import cProfile

    _profiling: list[cProfile.Profile] = []

    def _toggle(_signum: int, _frame: object) -> None:
        if _profiling:
            profiler = _profiling.pop()
            profiler.disable()
            profiler.dump_stats(str(_PROFILE))
        else:
            _profiling.append(cProfile.Profile())
            _profiling[0].enable()

    signal.signal(signal.SIGUSR1, _toggle)
