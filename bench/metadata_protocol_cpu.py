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

    .venv/bin/python bench/metadata_protocol_cpu.py [--before /tmp/base/src]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import json
import os
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
    data_dir: str, instance_id: str, count: int, rounds: int, profile: str
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
    requests = requests_for(instance_id)
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


def run_child(
    src: Path, data: Path, instance_id: str, args: argparse.Namespace, profile: str
) -> Any:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), str(Path(__file__).resolve().parent)]),
        "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
        "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": storm_identity.SECRET,
        "CLOUDSEED_LOG_LEVEL": "warning",
    }
    argv = [str(data), instance_id, str(args.requests), str(args.rounds), profile]
    done = subprocess.run(
        [sys.executable, __file__, "--child", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{src}: {done.stdout[-2000:]}{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        data_dir, instance_id, count, rounds, profile = sys.argv[2:]
        # The parent's.
        storm_identity.SECRET = os.environ["CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET"]
        result = asyncio.run(_measure(data_dir, instance_id, int(count), int(rounds), profile))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout's src/ to measure too")
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", help="a cProfile of one round of this checkout, to FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="protocol-cpu-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        registries = register(data)
        with running_server(data, workers=2) as server:
            instance_id = seed(server, registries, 1, 1, 1).instances[0]
        measured = [("this checkout", SRC, args.profile or "")]
        if args.before is not None:
            measured.insert(0, ("before", args.before.resolve(), ""))
        for name, src, profile in measured:
            result = run_child(src, data, instance_id, args, profile)
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
