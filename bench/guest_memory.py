"""What one cached guest costs a metadata worker, and what holds it (issue 19: < 5 KiB per
guest in the boot storm's RSS measure), without the storm's ten minutes.

One SQLite state seeded as the storm seeds it (bench/metadata_storm.py: each server with a key
pair, 344 bytes of cloud-config user data, 3 metadata items and one port; ``--state`` reuses a
state it or this script seeded), then two measures of the same crawl: each guest's requests as
cloud-init makes them (28 with the EC2 tree), with the Neutron proxy's signed headers.

1. **RSS**: ``cloudseed serve --workers 1 --no-compute``; the storm's 200 priming guests are
   crawled first (what serving costs whatever the number of guests), then VmRSS; then
   ``--guests`` guests are crawled and VmRSS read again: the growth per guest, as the storm's
   ``KiB per cached instance`` (which reads the worker that grew most of two, after 256
   connections).
2. **tracemalloc**, in this process: a MetadataApp started on the same state answers the same
   crawl as a worker does (``respond_now``, else the ASGI path), from ``--connections``
   concurrent walkers; the Python memory still held afterwards, per guest, by allocation site;
   and a ``sys.getsizeof`` walk over one cached guest, by field, counting only the objects no
   other guest shares.

    .venv/bin/python bench/guest_memory.py [--guests 3000] [--state DIR]
        [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import linecache
import os
import platform
import shutil
import sys
import tempfile
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import storm_identity
from report import cpu_model, write_section
from storm_crawl import cloud_init_paths
from storm_host import load_average
from storm_identity import proxy_headers
from storm_seeding import PRIMING_INSTANCES, SEED_RECORD, seeded_state
from storm_server import running_server
from storm_workers import fill_every_worker, settled_rss

START = "<!-- bench:guest-memory:start -->"
END = "<!-- bench:guest-memory:end -->"
SITES = 18  # allocation sites shown


# --- the seeded state -----------------------------------------------------------------------------


def guests_of(state: Path | None, wanted: int, tmp: Path) -> tuple[Path, list[str], list[str]]:
    """The state, ``wanted`` guests to measure and the priming guests: from ``state`` when it
    was seeded with at least as many (the storm's ``storm-seed.json``), else seeded now."""
    if state is not None and (state / SEED_RECORD).exists():
        ids = json.loads((state / SEED_RECORD).read_text())["instances"]
        if len(ids) < wanted + PRIMING_INSTANCES:
            sys.exit(f"{state} holds {len(ids)} servers, fewer than {wanted} + priming")
        return state, ids[:wanted], ids[-PRIMING_INSTANCES:]
    seeding = argparse.Namespace(
        instances=wanted, workers=2, batch=200, create_concurrency=2, state=state
    )
    data_dir, seeded = seeded_state(seeding, tmp)
    return data_dir, seeded.instances[:wanted], seeded.instances[wanted:]


def fresh_copy(state: Path, tmp: Path, name: str) -> Path:
    """A copy of ``state`` for one measure: serving records key deliveries, and each measure
    (and the next run) must start from the same records."""
    copy = tmp / name
    shutil.copytree(state, copy)
    return copy


# --- 1. a real worker's RSS -----------------------------------------------------------------------


def rss_per_guest(
    state: Path, guests: list[str], priming: list[str]
) -> tuple[list[str], dict[int, tuple[int, int]]]:
    """The crawl's paths, and each worker's VmRSS (KiB) before and after the guests' crawl:
    every guest's crawl in every worker, on connections known to be that worker's (the
    storm's ``fill_every_worker``)."""
    with running_server(state, 2, compute=False) as server:
        metadata = f"http://127.0.0.1:{server.metadata_port}"
        paths = cloud_init_paths(metadata, priming[0])
        fill_every_worker(server, priming, paths)
        before = settled_rss(server)
        fill_every_worker(server, guests, paths)
        after = settled_rss(server)
        return paths, {pid: (before[pid], after[pid]) for pid in after}


# --- 2. in this process: tracemalloc and one guest's objects --------------------------------------


def in_process_settings(state: Path) -> Any:
    from cloudseed.settings import load_settings

    environ = {
        "CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY": "true",
        "CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET": storm_identity.SECRET,
        "CLOUDSEED_LOG_LEVEL": "warning",
    }
    return load_settings(environ=environ, overrides={("DEFAULT", "state_path"): str(state)})


async def crawl_in_process(app: Any, guests: list[str], paths: list[str], connections: int) -> None:
    """Each request as serve's HTTP protocol makes it (coalescing.py): the answer at once
    when ``respond_now`` has one, else an ASGI cycle."""
    pending = iter(guests)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def request(path: str, headers: list[tuple[bytes, bytes]]) -> int:
        scope = {
            "type": "http",
            "method": "GET",
            "path": path,
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 40000),
        }
        now = app.respond_now("GET", path, "127.0.0.1", headers)
        if now is not None:
            if now.sent is not None:
                now.sent()
            return int(now.status)
        status = 0

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(scope, receive, send)
        return status

    async def walk() -> None:
        for instance_id in pending:
            headers = [
                (k.lower().encode(), v.encode()) for k, v in proxy_headers(instance_id).items()
            ]
            headers.insert(0, (b"host", b"127.0.0.1"))
            for path in paths:
                status = await request(path, headers)
                if status != 200:
                    raise RuntimeError(f"GET {path} for {instance_id}: {status}")

    await asyncio.gather(*(walk() for _ in range(connections)))


def _site(frame: tracemalloc.Frame) -> str:
    name = frame.filename
    for marker in ("/cloudseed/", "/site-packages/", "/lib/python3"):
        if marker in name:
            name = name.split(marker, 1)[1]
            break
    code = linecache.getline(frame.filename, frame.lineno).strip()
    return f"{name}:{frame.lineno} `{code[:70]}`"


async def _traced(
    state: Path, guests: list[str], priming: list[str], paths: list[str], connections: int
) -> tuple[list[tuple[str, float, float]], dict[str, float], int]:
    from cloudseed.metadata.app import create_metadata_app

    app = create_metadata_app(in_process_settings(state))
    await app.startup()
    try:
        await crawl_in_process(app, priming, paths, connections)
        gc.collect()
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        await crawl_in_process(app, guests, paths, connections)
        await asyncio.sleep(0.5)  # key deliveries recorded (metadata/delivery.py)
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        sites = [
            (_site(d.traceback[0]), d.size_diff / len(guests), d.count_diff / len(guests))
            for d in after.compare_to(before, "lineno")
            if d.size_diff > 0
        ]
        held = sum(max(0, d.size_diff) for d in after.compare_to(before, "filename"))
        store = app.store
        assert store is not None
        walk = one_guest(store, app.identifier, guests)
        return sites, walk, held
    finally:
        await app.shutdown()


def _reachable(root: object, seen: set[int]) -> int:
    """Bytes of every object reachable from ``root`` that is not in ``seen`` (added to it);
    classes, modules and functions are not followed."""
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | type(sys) | type(_reachable)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack += [*obj.keys(), *obj.values()]
        elif isinstance(obj, list | tuple | set | frozenset):
            stack += list(obj)
        elif hasattr(obj, "__slots__"):
            for cls in type(obj).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if hasattr(obj, name):
                        stack.append(getattr(obj, name))
        elif hasattr(obj, "__dict__"):
            stack.append(obj.__dict__)
    return total


def _fields(obj: object) -> Iterable[tuple[str, object]]:
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                yield name, getattr(obj, name)


def one_guest(store: Any, identifier: Any, guests: list[str]) -> dict[str, float]:
    """Bytes one cached guest holds alone, by what holds them: every object reachable from
    another guest (interned strings, shared constants) is counted as shared, not as its."""
    mine, other = store.cached_by_uuid(guests[0]), store.cached_by_uuid(guests[1])
    shared: set[int] = set()
    _reachable(other, shared)
    for value in (True, False, None, 0, 1, ""):
        shared.add(id(value))
    parts: dict[str, float] = {}
    shell = sys.getsizeof(mine)
    shared.add(id(mine))
    for name, value in _fields(mine):
        if name == "facts":
            parts["GuestFacts object"] = sys.getsizeof(value)
            shared.add(id(value))
            for fname, fvalue in _fields(value):
                size = _reachable(fvalue, shared)
                if size:
                    parts[f"facts.{fname}"] = size
        else:
            size = _reachable(value, shared)
            if size:
                parts[f"documents.{name}"] = size
    parts["GuestDocuments object"] = shell
    # The store's indexes: an entry in each dict, and the address key.
    entries = len(store._guests)
    parts["store._guests entry (OrderedDict)"] = sys.getsizeof(store._guests) / entries
    parts["store._by_address entry + address"] = sys.getsizeof(store._by_address) / len(
        store._by_address
    ) + sum(sys.getsizeof(a) for a in mine.facts.addresses)
    remembered = identifier._verifier._valid
    if remembered:
        signature, value = next(iter(remembered.items()))
        parts["remembered signature (dict entry, signature, id)"] = (
            sys.getsizeof(remembered) / len(remembered)
            + sys.getsizeof(signature)
            + sys.getsizeof(value)
        )
    return parts


# --- the report -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guests", type=int, default=3000)
    parser.add_argument("--state", type=Path, help="a state seeded by this or the storm benchmark")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--skip-rss", action="store_true", help="the in-process measures only")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="guest-memory-") as tmp_name:
        tmp = Path(tmp_name)
        seeded, guests, priming = guests_of(args.state, args.guests, tmp)
        state = fresh_copy(seeded, tmp, "served")
        load = load_average()
        rss: dict[int, tuple[int, int]] | None = None
        if args.skip_rss:
            with running_server(state, 2, compute=False) as server:
                paths = cloud_init_paths(f"http://127.0.0.1:{server.metadata_port}", priming[0])
        else:
            paths, rss = rss_per_guest(state, guests, priming)
            for pid, (before, after) in rss.items():
                growth = 1024 * (after - before) / len(guests)
                print(f"worker {pid}: RSS {before:,} -> {after:,} KiB: {growth:,.0f} B per guest")
        sites, walk, held = asyncio.run(
            _traced(fresh_copy(seeded, tmp, "in-process"), guests, priming, paths, args.connections)
        )
    section = report(args, len(guests), len(paths), load, rss, sites, walk, held)
    print(section)
    if args.write is not None:
        write_section(args.write, START, END, section)


def report(
    args: argparse.Namespace,
    guests: int,
    requests: int,
    load: str,
    rss: dict[int, tuple[int, int]] | None,
    sites: list[tuple[str, float, float]],
    walk: dict[str, float],
    held: int,
) -> str:
    lines = [
        "## Memory per cached guest (metadata service)",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} CPUs "
        f"({cpu_model()}), Python {platform.python_version()}; load average {load}",
        f"- Command: `.venv/bin/python bench/guest_memory.py {' '.join(sys.argv[1:])}`; code: "
        + (
            f"PYTHONPATH={os.environ['PYTHONPATH']}" if "PYTHONPATH" in os.environ else "the venv's"
        ),
        f"- {guests:,} guests of the storm's seeding (SQLite), each crawled as cloud-init does "
        f"({requests} requests, signed proxy headers) after 200 priming guests",
        "",
    ]
    if rss is not None:
        grown = max(after - before for before, after in rss.values())
        lines += [
            "**RSS** (`serve --workers 2 --no-compute`; every guest's crawl in each worker, "
            "on connections of its own; the worker that grew most, as the storm reads it): "
            + "; ".join(f"{b:,} -> {a:,} KiB" for b, a in rss.values())
            + f", **{1024 * grown / guests:,.0f} B ({grown / guests:.2f} KiB) per guest**.",
            "",
        ]
    lines += [
        f"**Python memory still held per guest** (tracemalloc, in-process): "
        f"**{held / guests:,.0f} B**. By allocation site:",
        "",
        "| site | B per guest | objects per guest |",
        "|---|---:|---:|",
        *(f"| {site} | {size:,.0f} | {count:.2f} |" for site, size, count in sites[:SITES]),
        "",
        "**One cached guest's own objects** (`sys.getsizeof` walk; what other guests share "
        "is left out):",
        "",
        "| held by | B |",
        "|---|---:|",
        *(
            f"| {name} | {size:,.0f} |"
            for name, size in sorted(walk.items(), key=lambda kv: -kv[1])
        ),
        f"| **total** | **{sum(walk.values()):,.0f}** |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
