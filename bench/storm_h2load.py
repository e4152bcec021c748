"""h2load (nghttp2-client) runs over HTTP/1.1: a list of URIs rotated per request in C, with
the same headers on every request, for a crawl of several paths measured without wrk's Lua
``request()`` on the shared cores (bench/metadata_one_guest.py ``--mixed``).

h2load takes the scheme, host and port from the first URI of its ``-i`` file only, and with
``--h1`` sends one request at a time per connection (no pipelining), as wrk does.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from storm_host import require_tool


@dataclass
class H2loadResult:
    what: str
    rps: float
    done: int
    succeeded: int
    failed: int
    errored: int
    statuses: str  # h2load's "status codes:" line, as it prints it

    @property
    def errors(self) -> int:
        return self.failed + self.errored + (self.done - self.succeeded)

    def describe(self) -> str:
        return (
            f"{self.what}: {self.rps:,.0f} req/s; {self.done:,} done, {self.errors} errors; "
            f"{self.statuses}"
        )


def write_uris(path: Path, base_url: str, paths: list[str]) -> Path:
    path.write_text("".join(f"{base_url}{p}\n" for p in paths))
    return path


def h2load_command(
    uris: Path, headers: dict[str, str], connections: int, seconds: float, threads: int = 2
) -> list[str]:
    command = [
        require_tool("h2load", "nghttp2-client"),
        "--h1",
        f"-t{threads}",
        f"-c{connections}",
        f"-D{int(seconds)}",
        "--warm-up-time=1",
        "-i",
        str(uris),
    ]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    return command


def parse_h2load(what: str, output: str) -> H2loadResult:
    rate = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", output)
    counts = re.search(
        r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
        r"(\d+) errored",
        output,
    )
    statuses = re.search(r"status codes: (.*)", output)
    if rate is None or counts is None or statuses is None:
        raise RuntimeError(f"h2load printed no result:\n{output}")
    return H2loadResult(
        what=what,
        rps=float(rate.group(1)),
        done=int(counts.group(3)),
        succeeded=int(counts.group(4)),
        failed=int(counts.group(5)),
        errored=int(counts.group(6)),
        statuses=statuses.group(1).strip(),
    )


def run_h2load(what: str, command: list[str]) -> H2loadResult:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"h2load failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    result = parse_h2load(what, done.stdout)
    print(result.describe(), flush=True)
    return result
