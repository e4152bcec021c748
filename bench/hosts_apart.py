"""Compute hosts apart from the API node (issue 32): what the image cache's download and the
console mirror cost.

1. image fetch: a ``--image-gib`` GiB raw image of random bytes registered on a real API node
   (``cloudseed serve --no-compute``, SQLite), then downloaded over loopback HTTP: plainly
   (httpx, bytes discarded: the HTTP path alone), and by the image cache (download, SHA-256,
   write, fsync, rename; the format check of a raw image reads nothing more); the
   hashing alone over the same file, for comparison;
2. console mirror on PostgreSQL: ``--guests`` instances of one host, each with a
   ``console.log`` (a Debian 12 first boot's, 6 KiB, tests/unit/hostkeys/samples), mirrored
   by the agent's ``ConsoleMirror`` through the qemu driver's ``console_stamp`` and
   ``console_output`` (no QEMU runs: the driver reads the files): the first pass (every tail
   stored), a pass with nothing changed, a pass with 5 % of the consoles grown by a line;
   the table's size, and one console read back as an API node reads it.

Usage (repository root, the project's venv)::

    .venv/bin/python bench/hosts_apart.py [--image-gib 2] [--guests 10000] \
        [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from report import code_version, cpu_model, write_section
from sqlalchemy import text
from sqlalchemy.orm import Session

# The suite's cluster and database helpers run the processes (tests/support/).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cloudseed.agent.console_mirror import ConsoleMirror
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.qemu import QemuDriver
from cloudseed.db.engines import Database
from cloudseed.images import service as images
from cloudseed.images.cache import ImageCache
from cloudseed.images.contents import CHUNK, Digest
from cloudseed.images.download import ImageDownloader
from cloudseed.schema import sync as schema_sync
from cloudseed.servers.lifecycle import console_tails
from cloudseed.servers.models import Instance
from tests.support import databases
from tests.support.cluster import ADMIN, running_cluster
from tests.support.qemu import settings_for

START, END = "<!-- bench:hosts-apart:start -->", "<!-- bench:hosts-apart:end -->"
HOST = "bench-host"
SAMPLE = (
    Path(__file__).resolve().parent.parent
    / "tests/unit/hostkeys/samples/debian12-cloud-init-22.4-first-boot.log"
)


def mib_per_s(size: int, seconds: float) -> str:
    return f"{size / seconds / (1 << 20):.0f} MiB/s"


def fetch_rows(tmp: Path, gib: int) -> list[tuple[str, str, str]]:
    size = gib << 30
    tmp.mkdir(parents=True)
    source = tmp / "image.raw"
    with source.open("wb") as out:
        for _ in range(size // CHUNK):
            out.write(os.urandom(CHUNK))
    rows = []
    with running_cluster("sqlite", tmp / "cluster") as cluster:
        db = Database.connect("api", cluster.url)
        try:
            image_id = db.run(
                lambda s: images.add_image(s, name="big", path=source, disk_format="raw").uuid,
                write=True,
            )
            with db.read() as session:
                found = images.boot_source(session, image_id)
        finally:
            db.dispose()
        assert found is not None
        url = f"{cluster.api}/image/v2/images/{image_id}/file"
        started = time.monotonic()
        received = 0
        with (
            httpx.Client(timeout=300) as client,
            client.stream("GET", url, headers=ADMIN) as answer,
        ):
            for piece in answer.iter_bytes():
                received += len(piece)
        plain = time.monotonic() - started
        assert received == size
        rows.append(
            ("HTTP download alone (bytes discarded)", f"{plain:.1f} s", mib_per_s(size, plain))
        )

        cache = ImageCache(tmp / "_base", ImageDownloader(servers=[f"{cluster.api}/image"]))
        started = time.monotonic()
        cache.fetch(found.disk)
        fetched = time.monotonic() - started
        cache.close()
        rows.append(
            (
                "image cache: download, SHA-256, write, fsync, rename",
                f"{fetched:.1f} s",
                mib_per_s(size, fetched),
            )
        )
    digest = Digest(md5=False)
    started = time.monotonic()
    with source.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    hashed = time.monotonic() - started
    rows.append(
        ("SHA-256 of the file alone (page cache)", f"{hashed:.1f} s", mib_per_s(size, hashed))
    )
    return rows


def console_rows(tmp: Path, guests: int) -> list[tuple[str, str, str]]:
    sample = SAMPLE.read_text()
    tmp.mkdir(parents=True)
    rows: list[tuple[str, str, str]] = []
    with databases.scratch_database("postgresql", str(tmp)) as url:
        settings = settings_for(
            tmp / "state",
            CLOUDSEED_API_DATABASE__CONNECTION=url,
            CLOUDSEED_DATABASE__CONNECTION=url,
        )
        schema_sync.sync(settings)
        api_db = Database.connect("api", url)
        cells = CellDatabases(api_db)
        cell = cells.all_cells()[0]
        uuids = [f"00000000-0000-4000-8000-{n:012d}" for n in range(guests)]

        def seed(session: Session) -> None:
            session.add_all(
                Instance(
                    uuid=u,
                    display_name="vm",
                    hostname="vm",
                    project_id="p",
                    user_id="u",
                    image_ref="i",
                    flavor_id="1",
                    vm_state="active",
                    reservation_id="r",
                    host=HOST,
                )
                for u in uuids
            )

        cell.run(seed, write=True)
        driver = QemuDriver(settings)
        for u in uuids:
            directory = driver.root / u
            directory.mkdir(parents=True)
            (directory / "console.log").write_text(sample.replace("debian", f"vm-{u[-6:]}"))
        mirror = ConsoleMirror(cells, host=HOST, driver=driver, interval=5, lock_dir=tmp / "locks")

        def timed(what: str) -> None:
            started = time.monotonic()
            written = mirror.run_once()
            seconds = time.monotonic() - started
            rows.append((what, f"{seconds * 1000:.0f} ms", f"{written} tails written"))

        timed(f"first pass: {guests:,} consoles, none stored yet")
        timed("a pass with nothing changed")
        for u in uuids[: guests // 20]:
            with (driver.root / u / "console.log").open("a") as log:
                log.write("login: \n")
        timed("a pass with 5 % of the consoles grown by a line")
        with cell.read() as session:
            size = session.scalar(text("SELECT pg_total_relation_size('console_tails')"))
        rows.append(
            (
                "console_tails on disk (table, TOAST, index)",
                f"{size / (1 << 20):.1f} MiB",
                f"{size / guests / 1024:.2f} KiB per guest",
            )
        )
        samples = []
        for u in uuids[:200]:
            started = time.monotonic()
            with cell.read() as session:
                console_tails.read(session, u)
            samples.append(time.monotonic() - started)
        rows.append(
            (
                "one console read back (a transaction, decompressed)",
                f"{statistics.median(samples) * 1000:.2f} ms median",
                "",
            )
        )
        worst = console_tails.pack(os.urandom(150_000).hex())
        rows.append(
            (
                "worst case, one tail: 100 KiB of hex noise, compressed",
                f"{len(worst) / 1024:.0f} KiB",
                "",
            )
        )
        driver.close()
        cells.dispose()
        api_db.dispose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image-gib", type=int, default=2)
    parser.add_argument("--guests", type=int, default=10_000)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cloudseed-hosts-apart-") as tmp:
        fetch = fetch_rows(Path(tmp) / "fetch", args.image_gib)
        consoles = console_rows(Path(tmp) / "consoles", args.guests)
    lines = [
        "## Consoles and the image cache",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}, "
        f"Python {platform.python_version()}",
        f"- Code: {code_version()}",
        "- Command: `.venv/bin/python bench/hosts_apart.py "
        f"--image-gib {args.image_gib} --guests {args.guests} --write docs/benchmarks.md`",
        "",
        f"Image fetch: {args.image_gib} GiB of random bytes (raw), `cloudseed serve --no-compute` "
        "on loopback.",
        "",
        "| What | Time | Rate |",
        "|---|---:|---:|",
        *(f"| {a} | {b} | {c} |" for a, b, c in fetch),
        "",
        f"Console mirror: {args.guests:,} guests of one host, PostgreSQL, the qemu driver's "
        "console files (6 KiB each, a Debian 12 first boot).",
        "",
        "| What | Cost | |",
        "|---|---:|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in consoles),
    ]
    section = "\n".join(lines)
    print(section)
    if args.write:
        write_section(args.write, START, END, section)


if __name__ == "__main__":
    main()
