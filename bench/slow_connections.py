"""Slow and many connections from one guest (issue 30): one address holds 6,000 half-sent
requests on the metadata listener of ``cloudseed serve --workers 2``, as the adversarial run
did; what each worker's descriptors come to, and whether another guest is still served with
its usual latency.

Two phases, each on a fresh server: the defaults (``[metadata] max_connections_per_address``
100 per worker, ``[wsgi] header_timeout`` 20 s), then the cap off (0), as before issue 30
(but with the head deadline, which now ends the hold after 20 s either way). In each phase:
descriptors per worker (``/proc/PID/fd``) and 200 requests of another guest (a new
connection each, as cloud-init makes them; p50/p99/max) before the hold and during it; how
many of the 6,000 were refused at once (503), how many were held, when the held ones got their
408; and the descriptors once it is over.

Usage (repository root, the project's venv)::

    PYTHONPATH=src .venv/bin/python bench/slow_connections.py [--connections 6000]
        [--write docs/benchmarks.md]

``--write`` replaces the section between ``<!-- bench:slow-connections:start -->`` and
``<!-- bench:slow-connections:end -->``, adding it when absent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from storm_host import free_port, load_average, venv_tool
from storm_server import stop, wait_until_answering

HOLDER = "127.0.0.9"  # the one guest holding the connections
OTHER = "127.0.0.2"  # another guest
HALF = b"GET /openstack/latest/meta_data.json HTTP/1.1\r\nHost: 169.254.169.254\r\nX-Half: "
GET = b"GET / HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n"
MARK = "slow-connections"


@dataclass
class Phase:
    name: str
    fds_before: list[int] = field(default_factory=list)
    fds_holding: list[int] = field(default_factory=list)
    fds_after: list[int] = field(default_factory=list)
    latency_before: list[float] = field(default_factory=list)
    latency_holding: list[float] = field(default_factory=list)
    refused: int = 0
    reset: int = 0
    timed_out: int = 0
    other: int = 0
    held_for: list[float] = field(default_factory=list)


def worker_pids(parent: int) -> list[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return sorted(int(p) for p in children)


def fds(pids: list[int]) -> list[int]:
    return [len(os.listdir(f"/proc/{pid}/fd")) for pid in pids]


@contextlib.contextmanager
def serving(data_dir: Path, env: dict[str, str]) -> Iterator[tuple[int, list[int]]]:
    cloudseed = venv_tool("cloudseed", "run with the project's venv python")
    full_env = {**os.environ, "CLOUDSEED_LOG_LEVEL": "warning", **env}
    subprocess.run(
        [cloudseed, "--data-dir", str(data_dir), "db", "sync"],
        env=full_env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    api_port, port = free_port(), free_port()
    log_path = data_dir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                cloudseed,
                "--data-dir",
                str(data_dir),
                "serve",
                "--no-compute",
                "--workers",
                "2",
                "--api-listen",
                f"127.0.0.1:{api_port}",
                "--metadata-listen",
                f"127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
        )
    try:
        wait_until_answering(f"http://127.0.0.1:{port}/", process, log_path)
        while len(worker_pids(process.pid)) < 2:
            time.sleep(0.05)
        yield port, worker_pids(process.pid)
    finally:
        stop(process)


def other_guest(port: int, count: int = 200) -> list[float]:
    """``count`` requests of another guest, one connection each; seconds each took."""
    took = []
    for _ in range(count):
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), 10, source_address=(OTHER, 0)) as s:
            s.sendall(GET)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
        took.append(time.perf_counter() - started)
    return took


class Opening:
    """Connections opened so far (or failed to open), and an event once all have."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.all_done = asyncio.Event()
        self.in_flight = asyncio.Semaphore(256)  # connects at once (the backlog is 2,048)

    def one_done(self) -> None:
        self.done += 1
        if self.done == self.total:
            self.all_done.set()


async def hold_one(port: int, phase: Phase, opening: Opening) -> None:
    try:
        async with opening.in_flight:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(HOLDER, 0)
            )
            writer.write(HALF)
    except OSError:
        phase.other += 1
        return
    finally:
        opening.one_done()
    sent = time.monotonic()
    try:
        answer = await asyncio.wait_for(reader.read(), 120)
    except ConnectionResetError:
        phase.reset += 1  # refused too, its 503 lost to the reset (the report's notes)
        return
    finally:
        writer.close()
    if answer.startswith(b"HTTP/1.1 503 "):
        phase.refused += 1
    elif answer.startswith(b"HTTP/1.1 408 "):
        phase.timed_out += 1
        phase.held_for.append(time.monotonic() - sent)
    else:
        phase.other += 1


async def hold(port: int, pids: list[int], phase: Phase, connections: int) -> None:
    opening = Opening(connections)
    tasks = [asyncio.ensure_future(hold_one(port, phase, opening)) for _ in range(connections)]
    await opening.all_done.wait()
    await asyncio.sleep(1.0)  # the last refusals are read and closed
    phase.fds_holding = fds(pids)
    phase.latency_holding = await asyncio.to_thread(other_guest, port)
    await asyncio.gather(*tasks)


def run_phase(name: str, env: dict[str, str], connections: int, tmp: Path) -> Phase:
    phase = Phase(name)
    data_dir = tmp / name.replace(" ", "-")
    data_dir.mkdir()
    with serving(data_dir, env) as (port, pids):
        phase.fds_before = fds(pids)
        phase.latency_before = other_guest(port)
        asyncio.run(hold(port, pids, phase, connections))
        time.sleep(1.0)  # the server closes the last 408s' sockets
        phase.fds_after = fds(pids)
    return phase


def ms(values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"{statistics.median(values) * 1000:.2f} / {p99 * 1000:.2f} / {values[-1] * 1000:.2f}"


def report(phases: list[Phase], connections: int, command: str) -> str:
    lines = [
        "## Slow and many connections from one guest (issue 30)",
        "",
        f"`{command}`, {time.strftime('%Y-%m-%d')}, load average {load_average()} at the end. "
        f"One address ({HOLDER}) opens {connections:,} connections to the metadata listener "
        "of `cloudseed serve --workers 2 --no-compute` (SQLite, remote-address mode) and sends "
        "half a request head on each, as the adversarial run of issue 30 did; another guest "
        f"({OTHER}) makes 200 requests meanwhile (`GET /`, a new connection each).",
        "",
        "| | descriptors per worker: before / holding / after | other guest's latency "
        "before, ms (p50 / p99 / max) | same, while held | refused at once: 503 / reset | held, "
        "then 408 | held for, s (min-max) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in phases:
        per_worker = " / ".join(
            "+".join(str(n) for n in counts)
            for counts in (p.fds_before, p.fds_holding, p.fds_after)
        )
        held = f"{min(p.held_for):.1f}-{max(p.held_for):.1f}" if p.held_for else "-"
        other = f" (+{p.other} other)" if p.other else ""
        lines.append(
            f"| {p.name} | {per_worker} | {ms(p.latency_before)} | {ms(p.latency_holding)} "
            f"| {p.refused:,} / {p.reset:,} | {p.timed_out:,}{other} | {held} |"
        )
    lines += [
        "",
        "Descriptors are `ls /proc/PID/fd | wc -l` of each worker (both listeners' sockets, "
        "the databases, the event loop's own included: about 20 with nothing open). With the "
        "defaults a worker holds at most `max_connections_per_address` (100) of the guest's "
        "connections, and the guest at most 200 over the two workers; the rest are answered "
        "503 at once, before anything of them is read. Without the cap the guest holds all "
        "of them, half in each worker, until `[wsgi] header_timeout` (20 s) answers each "
        "408; before issue 30 nothing ended them. A refused connection is answered 503 and "
        "closed without reading it: when its request has already arrived, unread, the close "
        "sends a reset, which may reach the client before it reads the 503 (the second "
        "figure); either way it is refused at once and its descriptor freed.",
    ]
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    start, end = f"<!-- bench:{MARK}:start -->", f"<!-- bench:{MARK}:end -->"
    block = f"{start}\n{text}{end}"
    doc = path.read_text()
    if start in doc:
        doc = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(doc)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=6000)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args(argv)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < args.connections + 100:
        sys.exit(f"needs {args.connections + 100} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    command = "PYTHONPATH=src .venv/bin/python bench/slow_connections.py " + " ".join(argv)
    with tempfile.TemporaryDirectory() as tmp:
        phases = [
            run_phase("defaults", {}, args.connections, Path(tmp)),
            run_phase(
                "cap off (0)",
                {"CLOUDSEED_METADATA__MAX_CONNECTIONS_PER_ADDRESS": "0"},
                args.connections,
                Path(tmp),
            ),
        ]
    text = report(phases, args.connections, command.strip())
    print(text)
    if args.write:
        write_section(args.write, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
