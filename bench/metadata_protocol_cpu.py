"""The metadata listener's CPU per request without the socket: one warm guest's requests fed
to the HTTP protocol ``cloudseed serve`` runs (its head limits, the metrics edge, the metadata
app) in one process, through a transport that only keeps what is written.

It measures what a worker spends on a request besides the system calls (wrk's share and the
kernel's are left out), so a change to the HTTP layer or the app can be judged without the noise
of a shared machine. The guest is bench/metadata_one_guest.py's (a key pair, user data, 3
metadata items, signed Neutron proxy headers); cloud-init's 8 usual paths in turn, best of
``--rounds``, then each path on its own. ``--before SRC`` measures another checkout's src/
too, in the same run; ``--profile FILE`` writes a cProfile of one round of this checkout
(``python -m pstats FILE``).

``--first-asks N`` measures a boot storm's requests instead: N guests, loaded ahead into the
worker's cache as the compute agent's builds have them loaded, each asking its 8 paths once
(step by step across the guests, as bench/metadata_storm_wrk.lua sends them): every request is
the worker's first for that document, the cold storm's cost (issue 36) without its socket.

``--instructions`` (with ``--first-asks``) counts instead of timing: the child runs under
valgrind's callgrind twice, once walking every guest's requests and once only setting up (the
app, the guests loaded ahead and prepared), and the difference is divided by the requests. An
instruction count is the same from run to run whatever else the machine does, where the timed
walk moved by a fifth between runs on a shared machine (docs/benchmarks.md, issue 36, session
10); about two minutes per checkout.

    .venv/bin/python bench/metadata_protocol_cpu.py [--before /tmp/base/src] [--first-asks 500]
        [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

import storm_identity
from storm_crawl import CLOUD_INIT_PATHS
from storm_identity import proxy_headers
from storm_seeding import register, seed
from storm_server import running_server

SRC = Path(__file__).resolve().parent.parent / "src"


class KeptWrites(asyncio.Transport):
    """A transport that counts what is written and keeps the last write."""

    def __init__(self) -> None:
        super().__init__()
        self.last = b""
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.last = data
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        raise AssertionError(f"the protocol closed the connection after {self.last[:200]!r}")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("10.0.0.2", 40000), "sockname": ("127.0.0.1", 8775)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def requests_for(instance_id: str) -> list[bytes]:
    headers = "".join(f"{k}: {v}\r\n" for k, v in proxy_headers(instance_id).items())
    return [
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:8775\r\nUser-Agent: Cloud-Init/23.1\r\n"
        f"Accept: */*\r\n{headers}\r\n".encode()
        for path in CLOUD_INIT_PATHS
    ]


async def _measure(
    data_dir: str, instance_ids: list[str], count: int, rounds: int, profile: str
) -> dict[str, Any]:
    """In a child whose sys.path starts with the code under test: the app and protocol built
    as serve.serve_sockets builds them for the metadata listener."""
    import uvicorn
    from uvicorn.lifespan.on import LifespanOn
    from uvicorn.server import ServerState

    from cloudseed import serve
    from cloudseed.metadata.tokens import with_shared_key
    from cloudseed.metrics import Metrics, instrument
    from cloudseed.settings import load_settings

    settings = with_shared_key(load_settings(overrides={("DEFAULT", "state_path"): data_dir}))
    metadata = next(x for x in serve.listeners(settings, compute=False) if x.kind == "metadata")
    # A listener's factory is given its worker's API database, in checkouts where the apps of
    # a worker share one (serve.serve_sockets); an older --before checkout's opens its own.
    factory: Any = metadata.factory
    if len(inspect.signature(factory).parameters) == 2:
        from cloudseed.db.engines import Database

        made = factory(settings, Database.connect("api", settings.api_database_url))
    else:
        made = factory(settings)
    app = instrument(made, listener="metadata", metrics=Metrics(), settings=settings)
    w = settings.wsgi
    limits = serve.HeadLimits(
        max_request_line=w.max_request_line,
        max_header_line=w.max_header_line,
        max_header_size=w.max_header_size,
    )
    config = uvicorn.Config(
        app,
        lifespan="on",
        access_log=False,
        proxy_headers=False,
        http=serve.CoalescingHttpToolsProtocol.with_limits(limits),
        log_config=None,
        server_header=False,
        date_header=True,
    )
    config.load()
    lifespan = LifespanOn(config)
    await lifespan.startup()
    state = ServerState()
    state.default_headers = [(b"date", formatdate(usegmt=True).encode())]
    protocol = config.http_protocol_class(  # type: ignore[call-arg]
        config=config, server_state=state, app_state={}, _loop=asyncio.get_running_loop()
    )
    transport = KeptWrites()
    protocol.connection_made(transport)
    if len(instance_ids) > 1:
        result = await _first_asks(made, protocol, transport, instance_ids, profile)
        await lifespan.shutdown()
        return result
    requests = requests_for(instance_ids[0])
    for request in requests:  # the guest loaded, every document rendered: the ASGI path
        protocol.data_received(request)
        await asyncio.sleep(0.2)
        if b" 200 " not in transport.last.split(b"\r\n", 1)[0]:
            raise SystemExit(f"{request[:60]!r}: {transport.last[:300]!r}")
    results = []
    writes = 0
    feed = protocol.data_received
    n = len(requests)
    for round_no in range(rounds):
        profiler = cProfile.Profile() if profile and round_no == 0 else None
        before = transport.writes
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        for i in range(count):
            feed(requests[i % n])
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0.05)  # anything left to the ASGI path finishes
        writes = transport.writes - before
        results.append(elapsed / count * 1e6)
    per_path = {}
    for path, request in zip(CLOUD_INIT_PATHS, requests, strict=True):
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(count // n):
                feed(request)
            best = min(best, (time.perf_counter() - started) / (count // n))
        per_path[path] = best * 1e6
    await lifespan.shutdown()
    return {
        "rounds": results,
        "us_per_request": min(results[1:] or results),
        "writes_per_request": writes / count,
        "per_path": per_path,
    }


# The child's part under callgrind (--instructions): "setup" or "walk".
COUNTED_PART = "PROTOCOL_CPU_COUNTED_PART"


async def _first_asks(
    app: Any, protocol: Any, transport: KeptWrites, instance_ids: list[str], profile: str
) -> dict[str, Any]:
    """Every guest loaded ahead, then each of its requests fed once, step by step."""
    app.store.load_ahead(instance_ids)
    deadline = time.monotonic() + 120
    while len(app.store) < len(instance_ids):
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(app.store)} of {len(instance_ids)} guests loaded ahead")
        await asyncio.sleep(0.05)
    crawls = [requests_for(instance_id) for instance_id in instance_ids]
    feed = protocol.data_received

    def walk() -> dict[str, float]:
        """Every guest's request of each step, step by step: µs per request, by path."""
        per_step = {}
        for step, path in enumerate(CLOUD_INIT_PATHS):
            step_started = time.perf_counter()
            for crawl in crawls:
                feed(crawl[step])
            per_step[path] = (time.perf_counter() - step_started) / len(crawls) * 1e6
        return per_step

    part = os.environ.get(COUNTED_PART)
    if part is not None:  # under callgrind (--instructions): the walk alone, or none
        if part == "walk":
            walk()
            if not transport.last.startswith(b"HTTP/1.1 200 "):
                raise SystemExit(f"the last answer: {transport.last[:300]!r}")
        return {}

    profiler = cProfile.Profile() if profile else None
    before = transport.writes
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    per_step = walk()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    elapsed = time.perf_counter() - started
    writes = transport.writes - before
    await asyncio.sleep(0.5)  # anything left to the ASGI path finishes
    # The same requests again: documents rendered, most not replayed (more than the replays
    # hold): what a first ask costs beyond any answer at once.
    again = walk()
    await asyncio.sleep(0.5)
    total = len(crawls) * len(CLOUD_INIT_PATHS)
    if not transport.last.startswith(b"HTTP/1.1 200 "):
        raise SystemExit(f"the last answer: {transport.last[:300]!r}")
    return {
        "us_per_request": elapsed / total * 1e6,
        "writes_per_request": writes / total,
        "per_path": per_step,
        "again": again,
    }


def child_command(
    src: Path, data: Path, instance_ids: list[str], args: argparse.Namespace, profile: str
) -> tuple[list[str], dict[str, str]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), str(Path(__file__).resolve().parent)]),
        "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
        "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": storm_identity.SECRET,
        "CLOUDSEED_LOG_LEVEL": "warning",
    }
    argv = [str(data), ",".join(instance_ids), str(args.requests), str(args.rounds), profile]
    return [sys.executable, __file__, "--child", *argv], env


def run_child(
    src: Path, data: Path, instance_ids: list[str], args: argparse.Namespace, profile: str
) -> Any:
    command, env = child_command(src, data, instance_ids, args, profile)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{src}: {done.stdout[-2000:]}{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def instructions_per_first_ask(
    src: Path, data: Path, instance_ids: list[str], args: argparse.Namespace, tmp: Path
) -> float:
    """The child under callgrind with the walk and without it, both at once (one per core):
    the instructions the walk took, per request. Hash randomisation is off so that both runs
    lay out their dicts alike."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("--instructions needs valgrind (Debian's valgrind package)")
    runs = {}
    for part in ("walk", "setup"):
        command, env = child_command(src, data, instance_ids, args, "")
        out = tmp / f"callgrind.{src.name}.{part}"
        env |= {COUNTED_PART: part, "PYTHONHASHSEED": "0"}
        callgrind = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}"]
        process = subprocess.Popen(
            callgrind + command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        runs[part] = (process, out)
    totals = {}
    for part, (process, out) in runs.items():
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            sys.exit(f"{src} ({part}, under callgrind): {stdout[-2000:]}{stderr[-3000:]}")
        summary = next(x for x in out.read_text().splitlines() if x.startswith("summary:"))
        totals[part] = int(summary.split()[1])
    return (totals["walk"] - totals["setup"]) / (len(instance_ids) * len(CLOUD_INIT_PATHS))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        data_dir, instance_ids, count, rounds, profile = sys.argv[2:]
        # The parent's.
        storm_identity.SECRET = os.environ["CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET"]
        ids = instance_ids.split(",")
        result = asyncio.run(_measure(data_dir, ids, int(count), int(rounds), profile))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout's src/ to measure too")
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="a cProfile of one round of this checkout, to FILE")
    parser.add_argument(
        "--first-asks", type=int, metavar="N", help="N guests asking each path once (cold)"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="with --first-asks: count instructions per first ask under callgrind",
    )
    args = parser.parse_args()
    if args.first_asks is not None and args.first_asks < 2:
        parser.error("--first-asks needs at least 2 guests")
    if args.instructions and not args.first_asks:
        parser.error("--instructions counts the first asks: give --first-asks N")
    with tempfile.TemporaryDirectory(prefix="protocol-cpu-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        registries = register(data)
        guests = args.first_asks or 1
        with running_server(data, workers=2) as server:
            instance_ids = seed(server, registries, guests, min(guests, 100), 2).instances
        measured = [("this checkout", SRC, args.profile or "")]
        if args.before is not None:
            measured.insert(0, ("before", args.before.resolve(), ""))
        for name, src, profile in measured:
            if args.instructions:
                counted = instructions_per_first_ask(src, data, instance_ids, args, Path(tmp))
                print(
                    f"{name}: {counted:,.0f} instructions per first ask ({guests:,} guests x "
                    f"{len(CLOUD_INIT_PATHS)} paths, once each; callgrind)"
                )
                continue
            result = run_child(src, data, instance_ids, args, profile)
            if args.first_asks:
                print(
                    f"{name}: {result['us_per_request']:.1f} µs per first ask ({guests:,} "
                    f"guests x {len(CLOUD_INIT_PATHS)} paths, once each); "
                    f"{result['writes_per_request']:.2f} writes per request"
                )
                print("  " + ", ".join(f"{p} {us:.1f}" for p, us in result["per_path"].items()))
                again = result["again"].items()
                print("  asked again: " + ", ".join(f"{p} {us:.1f}" for p, us in again))
                continue
            rounds = ", ".join(f"{r:.1f}" for r in result["rounds"])
            print(
                f"{name}: {result['us_per_request']:.1f} µs per request (best of "
                f"{args.rounds} rounds of {args.requests:,}, the first left out: {rounds}); "
                f"{result['writes_per_request']:.2f} writes per request"
            )
            print("  " + ", ".join(f"{p} {us:.1f}" for p, us in result["per_path"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
