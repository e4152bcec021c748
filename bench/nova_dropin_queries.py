"""What an idle node costs Nova's databases, measured on the running services of
bench/nova_dropin.py while no request comes: two windows of ``--idle-seconds`` each, Nova's
metadata servers alone (the drop-in stopped), then with ``cloudseed nova-metadata`` running
too. Counted two ways:

- PostgreSQL's own counters: transactions (``xact_commit + xact_rollback`` in
  pg_stat_database) in each of Nova's databases, from the server's side, whoever sends them
  (pool pre-pings included); the second window's minus the first's is the drop-in's;
- the drop-in's statements as its processes send them (bench/nova_dropin_hooks/sitecustomize.py
  on their ``PYTHONPATH``), per worker and database, on any backend (on SQLite, where a poll
  is a ``PRAGMA data_version`` while nobody writes, only this way).

The drop-in is started for its window with the counter and stopped afterwards: the storm then
starts it again, cold and uncounted. ``database_time`` adds the database's own time per
poll on the deployment's cell1 (bench/nova_dropin_idle.py's measurement).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from nova_dropin_report import Idle, per_second, statements_per_worker
from nova_dropin_servers import Targets
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from storm_host import step

from cloudseed.nova_metadata.databases import driver_url
from tests.support import databases
from tests.support.waiting import wait_until

HOOKS = Path(__file__).resolve().parent / "nova_dropin_hooks"
QUIET_SECONDS = 1.0
SETTLE_SECONDS = 3.0  # after the drop-in answers: its workers' first polls and cell reads


def hooks_path() -> str:
    """PYTHONPATH with the hooks' directory first."""
    return os.pathsep.join(filter(None, [str(HOOKS), os.environ.get("PYTHONPATH")]))


def database_names(urls: dict[str, str]) -> dict[str, str]:
    """Nova's databases as the counters name them (the name, or a SQLite file's name) ->
    Nova's label (api, cell0, ...)."""
    return {str(make_url(url).database).rsplit("/", 1)[-1]: label for label, url in urls.items()}


def settle(urls: dict[str, str]) -> None:
    """VACUUM ANALYZE every Nova database, so that autovacuum, whose transactions
    pg_stat_database counts too, has nothing left to do after the seeding."""
    for url in urls.values():
        engine = create_engine(driver_url(url), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(text("VACUUM ANALYZE"))
        finally:
            engine.dispose()


def quiet(names: list[str]) -> None:
    """Wait until the counters stand still for a second (a backend's counts reach them at its
    next idle moment or exit, after its client has gone: VACUUM's transactions, one per
    table, would otherwise land in the first window)."""

    def still() -> bool:
        before = transactions(names)
        time.sleep(QUIET_SECONDS)
        return transactions(names) == before

    wait_until(still, timeout=30, interval=0.0, what="Nova's databases' counters standing still")


def transactions(names: list[str]) -> dict[str, int]:
    """PostgreSQL's committed and rolled back transactions so far, per database."""
    engine = create_engine(databases.ADMIN_URLS["postgresql"], isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT datname, xact_commit + xact_rollback FROM pg_stat_database "
                    "WHERE datname = ANY(:names)"
                ),
                {"names": names},
            ).all()
    finally:
        engine.dispose()
    return {str(name): int(count) for name, count in rows}


def statement_counts(directory: Path) -> dict[int, dict[str, int]]:
    """Each process's statements so far, by database (the hooks' files)."""
    counts: dict[int, dict[str, int]] = {}
    for path in directory.glob("*.json"):
        try:
            counts[int(path.stem)] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced: the next snapshot has it
    return counts


def _window(
    seconds: float, names: list[str], postgresql: bool, count_dir: Path | None
) -> tuple[dict[str, float], dict[int, dict[str, int]], dict[int, dict[str, int]], float]:
    before_tx = transactions(names) if postgresql else {}
    before = statement_counts(count_dir) if count_dir else {}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    after_tx = transactions(names) if postgresql else {}
    after = statement_counts(count_dir) if count_dir else {}
    return per_second(before_tx, after_tx, elapsed), before, after, elapsed


def measure_idle(targets: Targets, backend: str, seconds: float, scratch: Path) -> Idle:
    """Both windows; the drop-in is left stopped."""
    labels = database_names(targets.nova.database_urls)
    names = list(labels)
    postgresql = backend == "postgresql"
    targets.stop("dropin")
    if postgresql:
        done = step("VACUUM ANALYZE of Nova's databases (autovacuum's work done before)")
        settle(targets.nova.database_urls)
        quiet(names)
        done()
    done = step(f"idle: Nova's metadata servers alone, {seconds:g} s")
    nova_tx, _, _, _ = _window(seconds, names, postgresql, None)
    done()
    count_dir = scratch / "statement-counts"
    count_dir.mkdir()
    targets.start(
        "dropin",
        {"NOVA_DROPIN_COUNT_DIR": str(count_dir), "PYTHONPATH": hooks_path()},
    )
    time.sleep(SETTLE_SECONDS)
    done = step(f"idle: Nova's servers and cloudseed nova-metadata, {seconds:g} s")
    both_tx, before, after, elapsed = _window(seconds, names, postgresql, count_dir)
    done()
    targets.stop("dropin")
    return Idle(
        seconds=elapsed,
        labels=labels,
        nova_transactions=nova_tx,
        with_dropin_transactions=both_tx,
        statements=statements_per_worker(before, after, elapsed),
    )
