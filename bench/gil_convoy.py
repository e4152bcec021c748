"""How much a thread running Python slows a worker's event loop: the GIL convoy.

A metadata worker that loads guests in a thread (building records, facts and documents is
Python, holding the GIL) while its loop serves other guests makes the loop wait for the GIL.
On asyncio's loop that is one wait per loop turn (its callbacks run under one hold); on
uvloop, every libuv callback (a socket read) takes the GIL on its own, so each waits up to
the switch interval (``sys.setswitchinterval``; serve sets 0.5 ms) while the thread runs.

Each configuration runs in a child process: an event loop ping-ponging one byte over
``--pairs`` socket pairs (every reply is a read callback, as a request is) for ``--seconds``,
with or without a thread spinning in Python beside it. Reported: round trips a second and the
p50 / p99 of one round trip. This is why serve's ``LOOP_FIRST_SWITCH_INTERVAL`` is 0.1 ms
(issue 36, docs/benchmarks.md).

``--state DIR`` (a state directory with servers in it, such as bench/metadata_storm.py's
``--state``) measures the real thing instead, on uvloop: the ping-pong while a guest store
loads ``--guests`` of its servers ahead in its loading thread, at each switch interval, and
with nothing loading as the baseline. Reported over the round trips that ended while the
store loaded (the baseline: its first second), with how long the loading took.

    .venv/bin/python bench/gil_convoy.py [--seconds 3] [--pairs 8] [--state DIR --guests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import cast

LOOPS = ("uvloop", "asyncio")
INTERVALS = (0.005, 0.0005, 0.0001, 0.00005)
STORE_INTERVALS = (0.0005, 0.0001, 0.00005)


def spin(stop: threading.Event) -> None:
    """Python that never waits: what a loading thread's work looks like to the GIL."""
    while not stop.is_set():
        total = 0
        for n in range(1000):
            total += n * n


class Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are no subclass

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


class Pinger(asyncio.Protocol):
    def __init__(self, round_trips: tuple[list[float], list[float]]) -> None:
        # When each ended, how long each took: floats, which the collector does not track
        # (a growing list of tuples made its full collections pause the loop for ms).
        self.ended, self.took = round_trips
        self.sent = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.sent = time.perf_counter()
        self.transport.write(b"x")

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.ended.append(now)
        self.took.append(now - self.sent)
        self.sent = now
        self.transport.write(b"x")


async def ping_pong(pairs: int, seconds: float) -> list[tuple[float, float]]:
    """(when it ended, how long it took) of each round trip in ``seconds``."""
    loop = asyncio.get_running_loop()
    round_trips: tuple[list[float], list[float]] = ([], [])
    kept = []  # a socket object collected would close its descriptor under the transport
    for _ in range(pairs):
        left, right = socket.socketpair()
        kept += [left, right]
        await loop.create_connection(Echo, sock=left)
        await loop.create_connection(lambda: Pinger(round_trips), sock=right)
    await asyncio.sleep(seconds)
    return list(zip(*round_trips, strict=True))


async def ping_pong_while_loading(
    pairs: int, seconds: float, state: str, guests: int, loading: bool
) -> tuple[list[float], float]:
    """The ping-pong while a store loads ``guests`` servers of ``state`` ahead (or nothing):
    the round trips that ended while it loaded (at least the first second), and the seconds
    the loading took."""
    from sqlalchemy import text

    from cloudseed.cells.service import CellDatabases
    from cloudseed.db.engines import Database
    from cloudseed.metadata.cell_guests import CellGuests
    from cloudseed.metadata.store import GuestStore
    from cloudseed.settings import load_settings

    settings = load_settings(
        environ={"CLOUDSEED_LOG_LEVEL": "warning"},
        overrides={("DEFAULT", "state_path"): state},
    )
    cells = CellDatabases(Database.connect("api", settings.api_database_url))
    with cells.all_cells()[0].read() as session:
        uuids = list(
            session.scalars(
                text("SELECT uuid FROM instances WHERE deleted = 0 LIMIT :n"), {"n": guests}
            )
        )
    source = CellGuests(cells, dhcp_domain="novalocal", poll_interval=1.0)
    store = GuestStore(source, capacity=len(uuids) + 1)
    # As in a worker that has run a while (metadata/heap.py): what the imports and set-up
    # made is out of the collector's full walks, which otherwise paused the loop for ms.
    gc.collect()
    gc.freeze()
    pinging = asyncio.ensure_future(ping_pong(pairs, seconds))
    await asyncio.sleep(0.5)  # the ping-pong under way first
    started = time.perf_counter()
    if loading:
        store.load_ahead(uuids)
        while len(store) < len(uuids):
            await asyncio.sleep(0.001)
    took = time.perf_counter() - started
    window = started + max(took, 1.0)
    round_trips = [rtt for ended, rtt in await pinging if started <= ended <= window]
    cells.dispose()
    return round_trips, window - started


def child(loop_kind: str, busy_thread: bool, interval: float, pairs: int, seconds: float) -> None:
    sys.setswitchinterval(interval)
    stop = threading.Event()
    if busy_thread:
        threading.Thread(target=spin, args=(stop,), daemon=True).start()
    factory: Callable[[], asyncio.AbstractEventLoop]
    if loop_kind == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    else:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        round_trips = sorted(rtt for _, rtt in runner.run(ping_pong(pairs, seconds)))
    stop.set()
    print(json.dumps(summary(round_trips, seconds)))


def summary(round_trips: list[float], seconds: float) -> dict[str, float]:
    """The rate and percentiles (in ms) of ``round_trips``, sorted, made in ``seconds``."""
    n = len(round_trips)
    return {
        "rate": n / seconds,
        "p50_ms": round_trips[n // 2] * 1e3,
        "p99_ms": round_trips[int(n * 0.99)] * 1e3,
        "p999_ms": round_trips[int(n * 0.999)] * 1e3,
        "max_ms": round_trips[-1] * 1e3,
    }


def store_child(args: argparse.Namespace) -> None:
    import uvloop

    loading, interval = args.store_child
    sys.setswitchinterval(float(interval))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        round_trips, window = runner.run(
            ping_pong_while_loading(
                args.pairs, args.seconds, args.state, args.guests, loading == "1"
            )
        )
    round_trips.sort()
    print(json.dumps(summary(round_trips, window) | {"loading_s": window}))


def run_child(args: argparse.Namespace, *child_args: str) -> str:
    """This script in a process of its own (a fresh interpreter for each measurement), with
    ``--seconds`` and ``--pairs`` as given: what it printed."""
    command = [sys.executable, __file__, "--seconds", str(args.seconds)]
    command += ["--pairs", str(args.pairs), *child_args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def store_table(args: argparse.Namespace) -> int:
    print(
        f"| {args.guests:,} guests loaded ahead | switch interval | round trips/s | p50 | p99 "
        "| p99.9 | max | loaded in |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    runs = [("0", STORE_INTERVALS[0])] + [("1", interval) for interval in STORE_INTERVALS]
    for loading, interval in runs:
        out = run_child(
            args,
            "--state",
            args.state,
            "--guests",
            str(args.guests),
            "--store-child",
            loading,
            str(interval),
        )
        row = json.loads(out.splitlines()[-1])
        took = f"{row['loading_s']:.2f} s" if loading == "1" else "-"
        print(
            f"| {'in the loading thread' if loading == '1' else 'nothing'} "
            f"| {interval * 1e3:g} ms | {row['rate']:,.0f} | {row['p50_ms']:.3f} ms "
            f"| {row['p99_ms']:.3f} ms | {row['p999_ms']:.2f} ms | {row['max_ms']:.1f} ms "
            f"| {took} |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--child", nargs=3, metavar=("LOOP", "THREAD", "INTERVAL"))
    parser.add_argument("--state", help="a state directory with servers: the real store")
    parser.add_argument("--guests", type=int, default=2000)
    parser.add_argument(
        "--store-child", nargs=2, metavar=("LOADING", "INTERVAL"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.store_child:
        store_child(args)
        return 0
    if args.state:
        return store_table(args)
    if args.child:
        loop_kind, thread, interval = args.child
        child(loop_kind, thread == "1", float(interval), args.pairs, args.seconds)
        return 0
    print("| loop | thread running Python | switch interval | round trips/s | p50 | p99 |")
    print("|---|---|---:|---:|---:|---:|")
    for loop_kind in LOOPS:
        for busy in (False, True):
            for interval in INTERVALS if busy else INTERVALS[1:2]:
                out = run_child(args, "--child", loop_kind, "1" if busy else "0", str(interval))
                row = json.loads(out)
                print(
                    f"| {loop_kind} | {'yes' if busy else 'no'} | {interval * 1e3:g} ms "
                    f"| {row['rate']:,.0f} | {row['p50_ms']:.3f} ms | {row['p99_ms']:.3f} ms |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
