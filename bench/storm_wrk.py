"""wrk runs with bench/metadata_storm_wrk.lua: its input files (guests and paths), its command
line, its result line parsed, and passes run for a time or until every guest's crawl is done
once."""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import storm_identity
from report import BENCH_DIR
from storm_crawl import flat_name
from storm_host import require_tool
from storm_identity import sign

WRK_SCRIPT = BENCH_DIR / "metadata_storm_wrk.lua"


@dataclass
class WrkResult:
    what: str
    requests: int
    seconds: float
    statuses: dict[int, int]
    socket_errors: dict[str, int]
    latency_us: dict[str, float]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def non_200(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != 200)

    @property
    def errors(self) -> int:
        return self.non_200 + sum(self.socket_errors.values())

    def describe(self) -> str:
        ms = {k: v / 1000 for k, v in self.latency_us.items()}
        return (
            f"{self.what}: {self.requests:,} requests in {self.seconds:.1f} s = "
            f"{self.rps:,.0f} req/s; p50 {ms['p50']:.2f} ms, p99 {ms['p99']:.2f} ms, "
            f"max {ms['max']:.1f} ms; statuses {dict(sorted(self.statuses.items()))}; "
            f"socket errors {self.socket_errors}"
        )


def best(results: list[WrkResult]) -> WrkResult:
    return max(results, key=lambda r: r.rps)


def parse_wrk(what: str, output: str) -> WrkResult:
    line = next((x for x in output.splitlines() if x.startswith("STORM-RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{output}")
    fields = dict(item.split("=", 1) for item in line.split()[1:])
    statuses = {
        int(s): int(n)
        for s, n in (pair.split(":") for pair in fields["statuses"].split(",") if pair)
    }
    return WrkResult(
        what=what,
        requests=int(fields["requests"]),
        seconds=int(fields["duration_us"]) / 1e6,
        statuses=statuses,
        socket_errors={k: int(fields[k]) for k in ("connect", "read", "write", "timeout")},
        latency_us={
            k.removesuffix("_us"): float(fields[k])
            for k in ("p50_us", "p75_us", "p90_us", "p99_us", "p999_us", "max_us", "mean_us")
        },
    )


@dataclass(frozen=True)
class StormFiles:
    instances: Path  # "<uuid> <project> <signature>" per line
    paths: Path  # "<path> <flat name>" per line


def write_storm_files(
    directory: Path, instances: list[str], paths: list[str], *, project: str | None = None
) -> StormFiles:
    """wrk's input (bench/metadata_storm_wrk.lua): one line per guest (its proxy headers; the
    project is PROJECT unless given), one per path (with its flat name for nginx)."""
    directory.mkdir()
    files = StormFiles(directory / "instances.txt", directory / "paths.txt")
    owner = storm_identity.PROJECT if project is None else project
    files.instances.write_text("".join(f"{i} {owner} {sign(i)}\n" for i in instances))
    files.paths.write_text("".join(f"{p} {flat_name(p)}\n" for p in paths))
    return files


def wrk_command(
    args: argparse.Namespace,
    url: str,
    target: str,
    files: StormFiles,
    seconds: float,
    one_cycle: bool,
) -> list[str]:
    return [
        require_tool("wrk", "wrk"),
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{math.ceil(seconds)}s",
        "--timeout",
        "10s",
        "--latency",
        "-s",
        str(WRK_SCRIPT),
        url,
        "--",
        target,
        str(files.instances),
        str(files.paths),
        "1" if one_cycle else "0",
        str(args.threads),
        str(args.connections),
    ]


def pacing_env(delay_ms: int) -> dict[str, str]:
    """wrk's delay() (read by the Lua script from the environment: wrk asks whether the script
    has one before any thread gets its arguments): each connection waits this long after an
    answer before its next request."""
    return {**os.environ, "STORM_DELAY_MS": str(delay_ms)}


def run_wrk(
    what: str, command: list[str], delay_ms: int = 0, probe: Callable[[], None] | None = None
) -> WrkResult:
    """Run wrk to its end; ``probe`` is called 3 s in, while every connection is open."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pacing_env(delay_ms)
    )
    if probe is not None:
        time.sleep(3)
        probe()
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}):\n{stdout}{stderr}")
    result = parse_wrk(what, stdout)
    print(f"  {result.describe()}", flush=True)
    return result


def _wrk_until_one_cycle(command: list[str], threads: int) -> tuple[str, bool]:
    """Run wrk until every thread has had one answer per (instance, path) of its share, then
    stop it with SIGINT (it then reports the time actually taken), unless wrk's own -d ends it
    first: its output, and whether every thread finished its cycle."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pacing_env(0)
    )
    assert process.stdout is not None
    output: list[str] = []
    finished = 0
    for line in process.stdout:
        output.append(line)
        if line.startswith("CYCLE-DONE"):
            finished += 1
            if finished == threads:
                process.send_signal(signal.SIGINT)
    stderr = process.stderr.read() if process.stderr else ""
    if process.wait() != 0:
        raise RuntimeError(f"wrk failed ({process.returncode}):\n{''.join(output)}{stderr}")
    return "".join(output), finished == threads


def run_wrk_one_cycle(what: str, command: list[str], threads: int) -> WrkResult:
    """One answer per (instance, path) of every thread's share, or RuntimeError when wrk's
    time ran out first."""
    output, whole = _wrk_until_one_cycle(command, threads)
    if not whole:
        raise RuntimeError("wrk's time ran out before every instance was crawled once:\n" + output)
    result = parse_wrk(what, output)
    print(f"  {result.describe()}", flush=True)
    return result


def run_wrk_one_cycle_at_most(
    what: str, command: list[str], threads: int
) -> tuple[WrkResult, bool]:
    """Like run_wrk_one_cycle, but wrk's own -d may end the pass first: the result, and whether
    every instance was crawled once."""
    output, whole = _wrk_until_one_cycle(command, threads)
    result = parse_wrk(what, output)
    print(f"  {result.describe()}", flush=True)
    return result, whole
