"""The metrics edge's own cost per request, in one process: a trivial ASGI app called directly,
bare and wrapped in ``MetricsEdge`` (a metadata path, tallied; the histogram as served), and
the same with prometheus-client's increments per request for comparison. ``--multiprocess``:
values kept in files, as ``cloudseed serve --workers N`` does.

Usage: ``.venv/bin/python bench/metrics_edge_cost.py [--requests 200000] [--multiprocess]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from cloudseed.metrics._edge import MetricsEdge
from cloudseed.metrics._registry import Metrics
from cloudseed.metrics._routes import MetadataRoutes

SCOPE = {"type": "http", "method": "GET", "path": "/openstack/latest/meta_data.json"}
START = {"type": "http.response.start", "status": 200, "headers": []}
BODY = {"type": "http.response.body", "body": b"{}"}


async def app(_scope: Any, _receive: Any, send: Any) -> None:
    await send(START)
    await send(BODY)


async def sink(_message: Any) -> None:
    pass


async def receive() -> dict[str, Any]:
    return {"type": "http.request"}


async def per_call(call: Any, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await call(dict(SCOPE), receive, sink)
    return (time.perf_counter() - started) / n * 1e6


async def main(n: int, multiprocess_dir: str | None) -> None:
    metrics = Metrics(multiprocess_dir=multiprocess_dir)
    edge = MetricsEdge(
        app,
        metrics=metrics,
        listener="metadata",
        routes=MetadataRoutes(),
        scrapers=(),
        refuse="unknown",
        cells_of=lambda _scope: None,
    )
    requests = metrics.requests.labels("metadata", "r", "GET", "200")
    duration = metrics.duration.labels("metadata", "r")
    document = metrics.documents.labels("d")

    async def direct(scope: Any, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        await app(scope, receive, send)
        requests.inc()
        duration.observe(time.perf_counter() - started)
        document.inc()

    best: dict[str, float] = {}
    for _ in range(3):
        for name, call in (("bare", app), ("edge (tallied)", edge), ("direct increments", direct)):
            best[name] = min(best.get(name, 1e9), await per_call(call, n))
    metrics.flush()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    mode = "multiprocess (several workers)" if multiprocess_dir else "one process"
    print(f"{mode}: {n:,} calls each, best of 3, load average {load}, {os.cpu_count()} CPUs:")
    for name, us in best.items():
        extra = us - best["bare"]
        print(f"  {name}: {us:.2f} µs per request (+{extra:.2f} µs)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument(
        "--multiprocess", action="store_true", help="values in files, as with --workers N"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cloudseed-metrics-") as directory:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
        asyncio.run(main(args.requests, directory if args.multiprocess else None))
