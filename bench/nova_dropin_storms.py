"""The boot storms of bench/nova_dropin.py, each server started afresh before its own:

- **cold**: the server restarted with nothing cached and nothing loaded at start (the
  drop-in with ``[cloudseed_metadata] load_recent_seconds = 0``): every guest is on the one
  compute host of the seeding, so for the drop-in this is a host that came back, whose first
  misses have the rest loaded ahead (``host_boot_misses``, nova_metadata/hosts.py); and the
  drop-in once more with that off too (**cold, first contacts only**), every guest's first
  request waiting for its own load;
- **just gone ACTIVE**: what a real storm is. Before the server starts, every storm instance
  is put back to where Nova has it while building (``vm_state`` building, ``task_state``
  spawning, no ``launched_at``, its ``updated_at`` an hour back, so that nothing loads it at
  start); once the server answers, Nova's last write as each instance goes ACTIVE
  (``vm_state`` active, ``task_state`` NULL, ``power_state`` running, ``updated_at`` and
  ``launched_at`` now; one transaction per 50 instances, in the order they were made), then
  ``--boot-seconds`` for the guests to boot, then the storm (the drop-in's once more at
  ``--dropin-storm-connections``). The drop-in hears of the writes
  through its watch; Nova's metadata API does not need to (it reads an instance at its first
  request either way); both get the same scenario.

The rows are written with SQL on the cell database (``nova.database_urls["cell1"]``), the
columns Nova's ``Instance.save()`` writes at that step of its build.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from nova_dropin_report import Idle, storm_scenario
from nova_dropin_servers import Targets
from side_by_side_report import Measurement
from side_by_side_rounds import measurement
from sqlalchemy import bindparam, create_engine, text
from storm_crawl import CLOUD_INIT_PATHS
from storm_host import load_average, step
from storm_wrk import StormFiles, run_wrk_one_cycle_at_most, wrk_command

from cloudseed.nova_metadata.databases import driver_url

NAMES = {
    "uwsgi": "Nova 34 (uwsgi x{workers})",
    "gunicorn": "Nova 34 (gunicorn x{workers})",
    "dropin": "cloudseed nova-metadata (x{workers})",
}
ACTIVE_BATCH = 50  # instances per transaction of the final writes
NOTHING_AHEAD = "[cloudseed_metadata]\nload_recent_seconds = 0\n"
FIRST_CONTACTS = NOTHING_AHEAD + "host_boot_misses = 0\n"


@dataclass
class Run:
    args: argparse.Namespace
    backend: str = ""
    results: list[Measurement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)
    idle: Idle | None = None
    poll: dict[str, float] = field(default_factory=dict)
    profile: str = ""

    def name(self, server: str) -> str:
        return NAMES[server].format(workers=self.args.workers)

    def add(self, result: Measurement) -> None:
        self.results.append(result)


def storm_pass(
    run: Run, scenario: str, name: str, url: str, kind: str, files: StormFiles, connections: int
) -> None:
    """Every guest's crawl once (or as far as --storm-seconds reaches) against ``url``."""
    args = run.args
    command_args = argparse.Namespace(threads=args.threads, connections=connections)
    command = wrk_command(command_args, url, kind, files, args.storm_seconds, one_cycle=True)
    result, whole = run_wrk_one_cycle_at_most(name, command, args.threads)
    guests = files.instances.read_text().count("\n")
    reached = min(guests, result.requests // len(CLOUD_INIT_PATHS))
    note = (
        "every guest's 8 paths once"
        if whole
        else f"~{reached:,} guests reached in {args.storm_seconds:g} s"
    )
    run.add(measurement(scenario, name, result, note))
    run.loads.append(load_average())


def _start(chosen: Targets, server: str, directory: Path, *, conf: str | None) -> str:
    """``server`` started afresh; the drop-in with ``conf`` (a ``[cloudseed_metadata]``
    section) as its last config file, unless None."""
    if server != "dropin" or conf is None:
        return chosen.start(server)
    extra = directory / "nothing-ahead.conf"
    extra.write_text(conf)
    return chosen.start(server, extra_conf=(extra,))


def cold(run: Run, chosen: Targets, files: StormFiles, guests: int, directory: Path) -> None:
    """Each server started afresh (cold caches), then the storm; the drop-in's again at
    --dropin-storm-connections (its latency with fewer guests booting at once), and with
    first contacts only."""
    args = run.args
    rounds = [(server, args.storm_connections, False) for server in chosen.servers]
    if args.dropin_storm_connections:
        rounds.append(("dropin", args.dropin_storm_connections, False))
    rounds.append(("dropin", args.storm_connections, True))
    for server, connections, first_contacts in rounds:
        scenario = storm_scenario(guests, connections, first_contacts=first_contacts)
        done = step(f"{scenario.partition(', ')[2]}: {run.name(server)} started afresh")
        conf = FIRST_CONTACTS if first_contacts else NOTHING_AHEAD
        url = _start(chosen, server, directory, conf=conf)
        storm_pass(run, scenario, run.name(server), url, "cloudseed", files, connections)
        done()


def building(cell_url: str, uuids: list[str]) -> None:
    """The instances as Nova has them while building, last written an hour ago."""
    engine = create_engine(driver_url(cell_url))
    try:
        with engine.begin() as c:
            c.execute(
                text(
                    "UPDATE instances SET vm_state = 'building', task_state = 'spawning', "
                    "launched_at = NULL, updated_at = :when WHERE uuid IN :uuids"
                ).bindparams(bindparam("uuids", expanding=True)),
                {"when": _utcnow() - dt.timedelta(hours=1), "uuids": uuids},
            )
    finally:
        engine.dispose()


def gone_active(cell_url: str, uuids: list[str]) -> float:
    """Nova's last write of each instance as it goes ACTIVE; the seconds it took."""
    started = time.monotonic()
    engine = create_engine(driver_url(cell_url))
    statement = text(
        "UPDATE instances SET vm_state = 'active', task_state = NULL, power_state = 1, "
        "updated_at = :now, launched_at = :now WHERE uuid = :uuid"
    )
    try:
        for first in range(0, len(uuids), ACTIVE_BATCH):
            with engine.begin() as c:
                now = _utcnow()
                c.execute(
                    statement, [{"now": now, "uuid": u} for u in uuids[first:][:ACTIVE_BATCH]]
                )
    finally:
        engine.dispose()
    return time.monotonic() - started


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def cached_guests(url: str) -> int | None:
    """The drop-in's cached guests, summed over its workers (its /metrics)."""
    try:
        found = re.search(
            r"^cloudseed_metadata_cache_guests (\S+)$", httpx.get(url + "/metrics").text, re.M
        )
    except httpx.HTTPError:
        return None
    return int(float(found[1])) if found else None


def just_gone_active(
    run: Run,
    chosen: Targets,
    files: StormFiles,
    uuids: list[str],
    cell_url: str,
    directory: Path,
) -> None:
    """The storm of guests whose instances went ACTIVE after the server started (see the
    module's docstring), against every server."""
    args = run.args
    rounds = [(server, args.storm_connections) for server in chosen.servers]
    if args.dropin_storm_connections:
        rounds.append(("dropin", args.dropin_storm_connections))
    for server, connections in rounds:
        scenario = storm_scenario(len(uuids), connections, just_active=True)
        done = step(f"storm of instances just gone ACTIVE, {connections} conn.: {run.name(server)}")
        building(cell_url, uuids)
        url = _start(chosen, server, directory, conf=None)
        written = gone_active(cell_url, uuids)
        time.sleep(args.boot_seconds)
        if server == "dropin":
            cached = cached_guests(url)
            run.notes.append(
                f"Just gone ACTIVE, {connections} conn.: Nova's last writes of the "
                f"{len(uuids):,} instances took "
                f"{written:.1f} s; {args.boot_seconds:g} s later, when the storm began, the "
                f"drop-in's {args.workers} workers held {cached if cached is not None else '?'}"
                f" guests in all ({len(uuids) * args.workers:,} would be every guest in "
                "every worker)."
            )
        storm_pass(run, scenario, run.name(server), url, "cloudseed", files, connections)
        done()
