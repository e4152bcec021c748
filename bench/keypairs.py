"""Key pair benchmark: imports per second, and paginated list latency with many key pairs.

Runs the real server (``cloudseed serve``, as a subprocess) against a fresh database and talks
to it over HTTP, so every number includes routing, validation, JSON and the database:

1. import: ``--imports`` distinct ed25519 public keys (generated before timing) POSTed to
   ``/v2.1/os-keypairs`` at microversion 2.10 by ``--concurrency`` concurrent clients;
2. bulk load: ``--rows`` key pairs for one user written straight into ``key_pairs`` (set-up,
   not measured as API speed);
3. list at microversion 2.35: the first, a middle and the last page at ``limit=100``, first and
   middle pages at ``limit=1000`` (the default ``[api] max_limit``), each requested
   ``--repeat`` times in a row; then a walk over all ``--rows`` through ``keypairs_links``,
   checking that every name comes back once, in order;
4. the same user's whole list before 2.35 (no pagination: every row in one response);
5. ``--loaded-imports`` more imports, into the user that now has ``--rows`` key pairs.

Usage (from the repository root, with the project's venv)::

    .venv/bin/python bench/keypairs.py [--backend sqlite|postgresql|mariadb]
        [--rows 100000] [--imports 2000] [--concurrency 16] [--workers 1]
        [--write docs/benchmarks.md]

``--write`` replaces this backend's section of the Markdown file (between
``<!-- bench:keypairs-<backend>:start -->`` and ``<!-- bench:keypairs-<backend>:end -->``),
creating the file or the section when absent. PostgreSQL and MariaDB are the local servers the
test suite uses (override with CLOUDSEED_TEST_POSTGRESQL_URL / CLOUDSEED_TEST_MYSQL_URL); a
uniquely named database is created there and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import math
import os
import platform
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from report import cpu_model, write_section
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url
from storm_host import free_port
from storm_server import stop, wait_until_answering

from cloudseed.db.engines import make_engine
from cloudseed.keypairs.models import KeyPair
from cloudseed.schema import sync as schema_sync
from cloudseed.settings import Settings, load_settings

ADMIN_URLS = {
    "postgresql": os.environ.get(
        "CLOUDSEED_TEST_POSTGRESQL_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
    "mariadb": os.environ.get(
        "CLOUDSEED_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/mysql"
    ),
}
BACKEND_TITLES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mariadb": "MariaDB"}
PATH = "/v2.1/os-keypairs"
IMPORT_USER = "bench-import"
BULK_USER = "bench-bulk"
PROJECT = "bench"
BATCH = 5_000
INTRO = """# Benchmarks

Measured numbers for cloudseed; each section says the command that reproduces it (run from the
repository root after `make test-venv`). Numbers from different machines are not comparable.
"""


# --- measuring ----------------------------------------------------------------------------------


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


@dataclass
class Row:
    """One line of the results table."""

    what: str
    result: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    note: str = ""


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        p50 = "" if row.p50_ms is None else f", p50 {row.p50_ms:.1f} ms"
        p99 = "" if row.p99_ms is None else f", p99 {row.p99_ms:.1f} ms"
        print(f"  {row.what}: {row.result}{p50}{p99} {row.note}".rstrip(), flush=True)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.failures.append(message)
            print(f"  FAILED: {message}", flush=True)

    def table(self) -> str:
        lines = ["| Measurement | Result | p50 | p99 | Notes |", "|---|---:|---:|---:|---|"]
        for r in self.rows:
            p50 = "" if r.p50_ms is None else f"{r.p50_ms:.1f} ms"
            p99 = "" if r.p99_ms is None else f"{r.p99_ms:.1f} ms"
            lines.append(f"| {r.what} | {r.result} | {p50} | {p99} | {r.note} |")
        return "\n".join(lines)


def headers(version: str, user: str) -> dict[str, str]:
    return {
        "OpenStack-API-Version": f"compute {version}",
        "X-Auth-Token": f"{user}:{PROJECT}",
        "Accept": "application/json",
    }


# --- keys -----------------------------------------------------------------------------------------


def ed25519_public_keys(count: int) -> list[str]:
    """Real, distinct OpenSSH public key lines (what a client would import)."""
    lines = []
    for i in range(count):
        public = (
            ed25519.Ed25519PrivateKey.generate()
            .public_key()
            .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        )
        lines.append(f"{public.decode('ascii')} bench-{i}@example.com")
    return lines


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def bulk_rows(user_id: str, count: int, *, prefix: str) -> Iterator[list[dict[str, Any]]]:
    """Rows shaped as an import of an ed25519 key would store them, in batches.

    The 32 key bytes are random rather than a generated key (the list never parses them, and
    generating 100,000 real keys would dominate the set-up); the blob layout, the line and both
    fingerprints are computed exactly as for a real key.
    """
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    batch: list[dict[str, Any]] = []
    for i in range(count):
        blob = _ssh_string(b"ssh-ed25519") + _ssh_string(os.urandom(32))
        sha = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")
        batch.append(
            {
                "name": f"{prefix}{i:07d}",
                "user_id": user_id,
                "public_key": f"ssh-ed25519 {base64.b64encode(blob).decode('ascii')} "
                f"{prefix}{i}@example.com",
                "fingerprint": hashlib.md5(blob, usedforsecurity=False).digest().hex(":"),
                "fingerprint_sha256": f"SHA256:{sha}",
                "type": "ssh",
                "created_at": now,
                "updated_at": None,
            }
        )
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


# --- databases ------------------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(backend: str, tmp: Path) -> Iterator[tuple[str, str, str]]:
    """Yield (api URL, cell URL, server version) of new, empty databases; drop them after."""
    if backend == "sqlite":
        yield (
            f"sqlite:///{tmp}/cloudseed_api.sqlite",
            f"sqlite:///{tmp}/cloudseed_cell1.sqlite",
            f"SQLite {sqlite3.sqlite_version}",
        )
        return
    admin_url = make_url(ADMIN_URLS[backend])
    name = f"cloudseed_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            version = str(conn.scalar(text("SELECT version()")))
            if backend == "postgresql":
                conn.execute(text(f'CREATE DATABASE "{name}"'))
                version = " ".join(version.split()[:2])
            else:
                conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
                version = (
                    f"MariaDB {version}" if "mariadb" in version.lower() else f"MySQL {version}"
                )
        url = admin_url.set(database=name).render_as_string(hide_password=False)
        yield url, url, version
    finally:
        with admin.connect() as conn:
            if backend == "postgresql":
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            else:
                conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()


def bulk_load(settings: Settings, backend: str, user_id: str, count: int) -> float:
    """Insert ``count`` key pairs for ``user_id`` with Core executemany; return seconds."""
    engine = make_engine(settings.api_database_url)
    table = KeyPair.__table__
    try:
        started = time.perf_counter()
        for batch in bulk_rows(user_id, count, prefix="key-"):
            with engine.begin() as conn:
                conn.execute(insert(table), batch)
        if backend in ("postgresql", "mariadb"):
            # What autovacuum / InnoDB's persistent statistics do by themselves shortly after a
            # load this size; SQLite gathers no statistics unless told, and cloudseed never
            # tells it, so it is left as a real deployment would have it.
            with engine.begin() as conn:
                conn.execute(
                    text("ANALYZE TABLE key_pairs" if backend == "mariadb" else "ANALYZE key_pairs")
                )
        return time.perf_counter() - started
    finally:
        engine.dispose()


# --- the server -----------------------------------------------------------------------------------


def cloudseed_command() -> str:
    beside = Path(sys.executable).parent / "cloudseed"
    found = str(beside) if beside.exists() else shutil.which("cloudseed")
    if found is None:
        sys.exit("cannot find the cloudseed command: run with the project's venv python")
    return found


@contextlib.contextmanager
def running_server(
    tmp: Path, api_url: str, cell_url: str, workers: int, results: Results
) -> Iterator[str]:
    config = tmp / "cloudseed.ini"
    config.write_text(
        f"[DEFAULT]\nstate_path = {tmp}\nlog_level = warning\n\n"
        f"[api_database]\nconnection = {api_url}\n\n"
        f"[database]\nconnection = {cell_url}\n\n"
        "[quota]\nkey_pairs = -1\n",
        encoding="utf-8",
    )
    port = free_port()
    log_path = tmp / "server.log"
    command = [
        cloudseed_command(),
        "--config",
        str(config),
        "serve",
        "--api-listen",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(f"{base}/healthz", process, log_path)
        yield base
    finally:
        stop(process)
        results.check(
            process.returncode == 0,
            f"server exited with {process.returncode} after SIGTERM (expected 0)",
        )
        log_text = log_path.read_text(errors="replace")
        if process.returncode != 0 or "Traceback" in log_text:
            print(f"--- server log ---\n{log_text}", file=sys.stderr)


# --- the measurements -----------------------------------------------------------------------------


async def _import_all(
    base: str, user: str, lines: list[str], names: list[str], concurrency: int
) -> tuple[float, list[float], dict[int, int]]:
    """POST every key from ``concurrency`` clients; return (seconds, latencies, statuses)."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    pending = iter(range(len(lines)))
    hdrs = headers("2.10", user)

    async def worker(client: httpx.AsyncClient) -> None:
        for i in pending:  # one shared iterator: each index is taken by exactly one worker
            body = {"keypair": {"name": names[i], "public_key": lines[i]}}
            started = time.perf_counter()
            response = await client.post(PATH, json=body, headers=hdrs)
            latencies.append(time.perf_counter() - started)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code != 201 and statuses[response.status_code] <= 3:
                print(
                    f"  import {names[i]}: {response.status_code} {response.text[:300]}",
                    file=sys.stderr,
                )

    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [
        httpx.AsyncClient(base_url=base, limits=limits, timeout=60) for _ in range(concurrency)
    ]
    try:
        # Open every connection before the clock starts.
        await asyncio.gather(*(c.get("/healthz") for c in clients))
        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - started
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return elapsed, latencies, statuses


def measure_imports(
    results: Results,
    base: str,
    *,
    what: str,
    user: str,
    lines: list[str],
    names: list[str],
    concurrency: int,
) -> None:
    elapsed, latencies, statuses = asyncio.run(_import_all(base, user, lines, names, concurrency))
    errors = sum(n for status, n in statuses.items() if status != 201)
    ms = [s * 1000 for s in latencies]
    results.add(
        Row(
            what,
            f"{len(lines) / elapsed:,.0f} imports/s",
            percentile(ms, 50),
            percentile(ms, 99),
            f"{len(lines):,} imports in {elapsed:.1f} s, "
            f"{concurrency} concurrent clients, {errors} errors",
        )
    )
    results.check(errors == 0, f"{what}: non-201 answers {statuses}")


def measure_get(
    results: Results,
    client: httpx.Client,
    *,
    what: str,
    params: dict[str, str],
    version: str,
    expect: int,
    repeat: int,
    warmup: int = 5,
    check_next: bool | None = None,
) -> None:
    hdrs = headers(version, BULK_USER)
    latencies: list[float] = []
    size = 0
    for i in range(warmup + repeat):
        started = time.perf_counter()
        response = client.get(PATH, params=params, headers=hdrs)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            results.check(False, f"{what}: {response.status_code} {response.text[:300]}")
            return
        if i >= warmup:
            latencies.append(elapsed * 1000)
        if i == 0:
            body = response.json()
            size = len(response.content)
            got = len(body["keypairs"])
            results.check(got == expect, f"{what}: {got} key pairs, expected {expect}")
            if check_next is not None:
                results.check(
                    ("keypairs_links" in body) == check_next,
                    f"{what}: next link {'missing' if check_next else 'unexpected'}",
                )
    results.add(
        Row(
            what,
            f"{expect:,} key pairs, {size / 1024:,.0f} KiB",
            percentile(latencies, 50),
            percentile(latencies, 99),
            f"{repeat} sequential requests",
        )
    )


def measure_walk(
    results: Results, client: httpx.Client, base: str, *, rows: int, page: int
) -> None:
    hdrs = headers("2.35", BULK_USER)
    url: str | None = f"{base}{PATH}?limit={page}"
    names: list[str] = []
    pages = 0
    latencies: list[float] = []
    started = time.perf_counter()
    while url is not None:
        t0 = time.perf_counter()
        response = client.get(url, headers=hdrs)
        latencies.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            results.check(False, f"walk: {response.status_code} {response.text[:300]}")
            return
        body = response.json()
        pages += 1
        names.extend(k["keypair"]["name"] for k in body["keypairs"])
        links = body.get("keypairs_links") or []
        url = next((link["href"] for link in links if link["rel"] == "next"), None)
    elapsed = time.perf_counter() - started
    expected = [f"key-{i:07d}" for i in range(rows)]
    complete = names == expected
    results.add(
        Row(
            f"walk all {rows:,} via `keypairs_links`, limit={page} (2.35)",
            f"{elapsed:.2f} s",
            percentile(latencies, 50),
            percentile(latencies, 99),
            f"{pages} requests, {len(names):,} names seen"
            f"{', each once, in order' if complete else ' (WRONG)'}",
        )
    )
    results.check(
        complete,
        f"walk: saw {len(names)} names ({len(set(names))} distinct), expected {rows} in order",
    )


# --- report ---------------------------------------------------------------------------------------


def markers(backend: str) -> tuple[str, str]:
    return (f"<!-- bench:keypairs-{backend}:start -->", f"<!-- bench:keypairs-{backend}:end -->")


def command_line() -> str:
    exe = os.path.relpath(sys.executable)
    script = os.path.relpath(sys.argv[0])
    return shlex.join(
        [
            exe if not exe.startswith("..") else sys.executable,
            script if not script.startswith("..") else sys.argv[0],
            *sys.argv[1:],
        ]
    )


def section_text(args: argparse.Namespace, server_version: str, results: Results) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            f"## Key pairs: import and paginated list ({BACKEND_TITLES[args.backend]})",
            "",
            f"- Date: {now}",
            f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}",
            f"- Database: {server_version} on the same machine",
            f"- Server: `cloudseed serve --workers {args.workers}` (default settings apart from "
            "`[quota] key_pairs = -1`); the client (httpx, one keep-alive connection per "
            "concurrent client) runs on the same machine",
            f"- Set-up, not measured as API speed: {args.rows:,} key pairs bulk-loaded for one "
            "user with SQL inserts"
            + (
                "; then `ANALYZE`, as autovacuum / InnoDB statistics would do by themselves"
                if args.backend != "sqlite"
                else ""
            ),
            f"- Command: `{command_line()}`",
            "",
            results.table(),
            "",
        ]
    )


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=tuple(BACKEND_TITLES), default="sqlite")
    parser.add_argument(
        "--rows", type=int, default=100_000, help="key pairs bulk-loaded for the list measurements"
    )
    parser.add_argument(
        "--imports",
        type=int,
        default=2_000,
        help="key pairs imported over HTTP for the import measurement",
    )
    parser.add_argument(
        "--loaded-imports",
        type=int,
        default=500,
        help="imports into the user holding --rows key pairs (0: skip)",
    )
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients")
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--repeat", type=int, default=200, help="sequential requests per list measurement"
    )
    parser.add_argument(
        "--write",
        metavar="PATH",
        type=Path,
        help="replace this backend's section of this Markdown file",
    )
    args = parser.parse_args(argv)
    if args.rows < 2_000:
        parser.error("--rows must be at least 2000 (pages of 1000 are measured)")
    if args.imports < 1 or args.concurrency < 1 or args.workers < 1 or args.repeat < 1:
        parser.error("--imports, --concurrency, --workers and --repeat must be positive")
    return args


def step(message: str) -> Callable[[], None]:
    started = time.perf_counter()
    print(f"{message} ...", flush=True)
    return lambda: print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = Results()
    rows, page, big = args.rows, 100, 1000
    # A name in the middle, with at least a full page of 1000 after it.
    middle = f"key-{(rows - big) // 2:07d}"
    total_started = time.perf_counter()

    done = step(f"generating {args.imports + args.loaded_imports:,} ed25519 keys")
    lines = ed25519_public_keys(args.imports + args.loaded_imports)
    done()

    with tempfile.TemporaryDirectory(prefix="cloudseed-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with fresh_database(args.backend, tmp) as (api_url, cell_url, server_version):
            settings = load_settings(
                environ={
                    "CLOUDSEED_API_DATABASE__CONNECTION": api_url,
                    "CLOUDSEED_DATABASE__CONNECTION": cell_url,
                    "CLOUDSEED_STATE_PATH": str(tmp),
                    "CLOUDSEED_QUOTA__KEY_PAIRS": "-1",
                }
            )
            done = step(f"migrating a new {server_version} database")
            schema_sync.sync(settings)
            done()

            with running_server(tmp, api_url, cell_url, args.workers, results) as base:
                done = step(f"importing {args.imports:,} key pairs over HTTP")
                measure_imports(
                    results,
                    base,
                    what="import (POST, 2.10), empty table",
                    user=IMPORT_USER,
                    lines=lines[: args.imports],
                    names=[f"import-{i:07d}" for i in range(args.imports)],
                    concurrency=args.concurrency,
                )
                done()

                done = step(f"bulk-loading {rows:,} key pairs for one user")
                seconds = bulk_load(settings, args.backend, BULK_USER, rows)
                print(f"  {rows / seconds:,.0f} rows/s (set-up, not API speed)")
                done()

                done = step(f"listing at microversion 2.35, {args.repeat} times each")
                with httpx.Client(base_url=base, timeout=120) as client:
                    cases = [
                        (f"list first page, limit={page}", {"limit": str(page)}, True),
                        (
                            f"list middle page, limit={page}",
                            {"limit": str(page), "marker": middle},
                            True,
                        ),
                        (
                            f"list last page, limit={page}",
                            {"limit": str(page), "marker": f"key-{rows - page - 1:07d}"},
                            True,
                        ),
                        (f"list first page, limit={big}", {"limit": str(big)}, True),
                        (
                            f"list middle page, limit={big}",
                            {"limit": str(big), "marker": middle},
                            True,
                        ),
                    ]
                    for what, params, has_next in cases:
                        measure_get(
                            results,
                            client,
                            what=f"{what} (2.35)",
                            params=params,
                            version="2.35",
                            expect=int(params["limit"]),
                            repeat=args.repeat,
                            check_next=has_next,
                        )
                    done()

                    done = step(f"walking all {rows:,} key pairs, {big} a page")
                    measure_walk(results, client, base, rows=rows, page=big)
                    done()

                    done = step("listing everything before 2.35 (no pagination)")
                    measure_get(
                        results,
                        client,
                        what=f"list all {rows:,} unpaginated (2.34)",
                        params={},
                        version="2.34",
                        expect=rows,
                        repeat=3,
                        warmup=1,
                    )
                    done()

                if args.loaded_imports:
                    done = step(
                        f"importing {args.loaded_imports:,} key pairs for the user with {rows:,}"
                    )
                    measure_imports(
                        results,
                        base,
                        what=f"import (POST, 2.10), user already has {rows:,}",
                        user=BULK_USER,
                        lines=lines[args.imports :],
                        names=[f"more-{i:07d}" for i in range(args.loaded_imports)],
                        concurrency=args.concurrency,
                    )
                    done()

    print(f"\ntotal {time.perf_counter() - total_started:.0f} s\n")
    section = section_text(args, server_version, results)
    print(section)
    if results.failures:
        print("FAILED:\n" + "\n".join(f"- {f}" for f in results.failures), file=sys.stderr)
        return 1
    if args.write is not None:
        start, end = markers(args.backend)
        write_section(args.write, start, end, section, INTRO)
        print(f"wrote the {args.backend} section of {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
