"""Where a warm ``cloudseed nova-metadata`` worker spends its time, for bench/nova_dropin.py
when the drop-in misses a target: one worker (it then serves in its main thread) started with
bench/nova_dropin_hooks/sitecustomize.py, warmed for a few seconds, then cProfile'd during a
warm wrk pass of one guest at 8 connections (SIGUSR1 starts and stops it). cProfile slows
every Python call, so the shares matter, not the absolute times."""

from __future__ import annotations

import argparse
import os
import pstats
import signal
from pathlib import Path

from nova_dropin_queries import hooks_path
from nova_dropin_servers import Targets
from storm_crawl import CLOUD_INIT_PATHS
from storm_host import step
from storm_wrk import run_wrk, write_storm_files, wrk_command

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
