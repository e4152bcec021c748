"""CPU per answer written at once (``MetadataApp.respond_now``), in this process, with no HTTP
server or client around it: cloud-init's 8 usual paths on one warm guest with the Neutron
proxy's signed headers. What a change to the cached guest's documents costs per request,
where wrk's numbers on a shared machine are too noisy to tell a few per cent.

Run it once per checkout, alternating, under the benchmark lock; ``--state`` is a state
seeded by bench/metadata_storm.py or bench/guest_memory.py (copied, left unchanged):

    for src in /tmp/base/src src; do
        PYTHONPATH=$src flock /tmp/bench.lock .venv/bin/python bench/at_once_cpu.py --state DIR
    done
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import guest_memory
import metadata_storm as storm


async def per_answer(state: Path, rounds: int, answers: int) -> dict[str, float]:
    """Per path, the best round's CPU seconds per answer."""
    from cloudseed.metadata.app import create_metadata_app

    app = create_metadata_app(guest_memory.in_process_settings(state))
    await app.startup()
    try:
        guest = json.loads((state / storm.SEED_RECORD).read_text())["instances"][0]
        paths = storm.CLOUD_INIT_PATHS
        await guest_memory.crawl_in_process(app, [guest], paths, 1)  # every document cached
        headers = [(b"host", b"127.0.0.1")] + [
            (name.lower().encode(), value.encode())
            for name, value in storm.proxy_headers(guest).items()
        ]
        scopes: list[dict[str, Any]] = [
            {
                "type": "http",
                "method": "GET",
                "path": path,
                "query_string": b"",
                "headers": headers,
                "client": ("127.0.0.1", 40000),
            }
            for path in paths
        ]
        for scope in scopes:
            if app.respond_now(scope) is None:
                raise RuntimeError(f"{scope['path']} is not answered at once")
        per_path: dict[str, float] = {}
        for scope in scopes:
            best = float("inf")
            for _ in range(rounds):
                started = time.process_time()
                for _ in range(answers):
                    app.respond_now(scope)
                best = min(best, (time.process_time() - started) / answers)
            per_path[scope["path"]] = best
        return per_path
    finally:
        await app.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--answers", type=int, default=4_000, help="per path and round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="at-once-cpu-") as tmp:
        state = Path(tmp) / "state"
        shutil.copytree(args.state, state)
        seconds = asyncio.run(per_answer(state, args.rounds, args.answers))
    code = os.environ.get("PYTHONPATH", "the venv's")
    mean = sum(seconds.values()) / len(seconds)
    print(
        f"{code}: {mean * 1e6:.2f} µs per answer, the 8 paths' mean (best of {args.rounds} x "
        f"{args.answers:,} each); load average {storm.load_average()}"
    )
    print("  " + ", ".join(f"{path} {s * 1e6:.2f}" for path, s in seconds.items()))


if __name__ == "__main__":
    main()
