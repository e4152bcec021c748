"""Where ``cloudseed nova-metadata`` spends its time, for bench/nova_dropin.py when the drop-in
misses a target. Warm: one worker (it then serves in its main thread) started with
bench/nova_dropin_hooks/sitecustomize.py, warmed for a few seconds, then cProfile'd during a
warm wrk pass of one guest at 8 connections (SIGUSR1 starts and stops it). Cold: the drop-in's
own loader in this process, timed and cProfile'd loading guests from the deployment's
databases as a worker does on first contact. cProfile slows every Python call, so the shares
matter, not the absolute times."""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import signal
import time
from pathlib import Path

from nova_dropin_queries import hooks_path
from nova_dropin_servers import Targets
from sqlalchemy import event
from sqlalchemy.engine import Engine
from storm_crawl import CLOUD_INIT_PATHS
from storm_host import step
from storm_wrk import run_wrk, write_storm_files, wrk_command

from cloudseed.metadata.loading import BY_UUID, Key
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.loading import Loader
from tests.support import nova_peer
from tests.support.waiting import wait_until

TOP = 15
WARM_UP_SECONDS = 3.0
CONNECTIONS = 8


def short(function: tuple[str, int, str]) -> str:
    """``name (path:line)`` with the path cut after site-packages/, src/ or lib/pythonX.Y/."""
    path, line, name = function
    for marker in ("/site-packages/", "/src/", "/lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path}:{line})" if line else name


def summary(stats: pstats.Stats, top: int = TOP) -> str:
    """Markdown: the functions with the most own time, with their share of all and their
    inclusive time's share."""
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values()) or 1.0
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    lines = ["| function | own time | inclusive |", "|---|---:|---:|"]
    for function, (_calls, _primitive, own, inclusive, _callers) in rows:
        lines.append(
            f"| `{short(function)}` | {100 * own / total:.1f} % | {100 * inclusive / total:.1f} % |"
        )
    return "\n".join(lines)


def _loaded(path: Path) -> pstats.Stats | None:
    """The profile once it is written whole."""
    try:
        return pstats.Stats(str(path))
    except (OSError, EOFError, ValueError, TypeError):
        return None


def profile(nova: nova_peer.Nova, tmp: Path, guest: str, seconds: float, threads: int) -> str:
    """A Markdown part: the top functions by own time during a warm pass."""
    output = tmp / "dropin.prof"
    done = step("profile: one drop-in worker, one warm guest, cProfile")
    files = write_storm_files(
        tmp / "profile-wrk", [guest] * threads, CLOUD_INIT_PATHS, project=nova.project_id
    )
    one = Targets(nova, 1, ["dropin"])
    try:
        url = one.start(
            "dropin",
            {
                "NOVA_DROPIN_PROFILE": str(output),
                "PYTHONPATH": hooks_path(),
            },
        )
        command_args = argparse.Namespace(threads=threads, connections=CONNECTIONS)
        warm_up = wrk_command(command_args, url, "cloudseed", files, WARM_UP_SECONDS, False)
        run_wrk("drop-in x1, warming up", warm_up)
        pid = one.pids["dropin"]
        os.kill(pid, signal.SIGUSR1)
        measured = run_wrk(
            "drop-in x1 under cProfile",
            wrk_command(command_args, url, "cloudseed", files, seconds, False),
        )
        os.kill(pid, signal.SIGUSR1)
        stats = wait_until(lambda: _loaded(output), timeout=30, what="the profile written")
    finally:
        one.stop_all()
    done()
    return "\n".join(
        [
            f"### Where the drop-in's time goes (cProfile, 1 worker, one warm guest, "
            f"{CONNECTIONS} conn.)",
            "",
            f"{measured.rps:,.0f} req/s under the profiler ({seconds:g} s). The main thread's "
            "functions with the most own time (shares of the profiled time; the profiler "
            "inflates every Python call, so compare shares, not times):",
            "",
            summary(stats),
        ]
    )


# --- the cold path -------------------------------------------------------------------------------

COLD_SAMPLE = 200
COLD_BATCH = 32


def _quantile_ms(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))]


def cold_loads(nova: nova_peer.Nova, guests: list[str]) -> str:
    """A Markdown part: what loading a guest on first contact costs a worker (the drop-in's
    own Loader, in this process, on the deployment's databases): ``COLD_SAMPLE`` guests one at
    a time, as many in batches of ``COLD_BATCH`` (a worker loads the guests of requests that
    arrive together in one batch), and a third sample under cProfile."""
    if len(guests) < 3 * COLD_SAMPLE:
        return ""
    done = step(f"profile: loading {COLD_SAMPLE} guests cold, one at a time and in batches")
    databases = NovaDatabases.open(nova.database_urls["api"], nova.database_urls["cell1"])
    databases.refresh_cells()
    loader = Loader(databases, local=False, resolve=lambda _address: None)
    sent = [0]

    def count(*_args: object) -> None:
        sent[0] += 1

    event.listen(Engine, "before_cursor_execute", count)
    try:
        loader.load([Key(BY_UUID, guests[-1])])  # the pools' connections made
        singles, batched, profiled = (
            guests[i * COLD_SAMPLE : (i + 1) * COLD_SAMPLE] for i in range(3)
        )
        sent[0] = 0
        times = []
        for uuid in singles:
            started = time.perf_counter()
            loaded = loader.load([Key(BY_UUID, uuid)])
            times.append(time.perf_counter() - started)
            if None in loaded.values():
                raise RuntimeError(f"guest {uuid} not found by the drop-in's loader")
        statements = sent[0] / len(singles)
        started = time.perf_counter()
        for first in range(0, len(batched), COLD_BATCH):
            loader.load([Key(BY_UUID, u) for u in batched[first : first + COLD_BATCH]])
        per_guest_batched = (time.perf_counter() - started) / len(batched)
        profiler = cProfile.Profile()
        profiler.enable()
        for uuid in profiled:
            loader.load([Key(BY_UUID, uuid)])
        profiler.disable()
    finally:
        event.remove(Engine, "before_cursor_execute", count)
        databases.api.dispose()
        for cell in databases.cells.values():
            cell.db.dispose()
    done()
    return "\n".join(
        [
            "### The cold path: loading a guest from Nova's databases",
            "",
            f"The drop-in's own loader in the benchmark's process on this deployment, "
            f"{COLD_SAMPLE} guests each way: one at a time **{_quantile_ms(times, 50):.1f} ms** "
            f"median, {_quantile_ms(times, 99):.1f} ms p99, {statements:.0f} statements per "
            f"guest (the instance mapping in the API database, then the cell's rows); in "
            f"batches of {COLD_BATCH} **{1000 * per_guest_batched:.2f} ms per guest**. "
            "Each worker loads each guest once, so a storm of N guests costs 2 N loads with "
            "2 workers; the requests that wait for one are the storm's slow tail. Where a "
            "single load's time goes (cProfile):",
            "",
            summary(pstats.Stats(profiler), top=10),
        ]
    )
