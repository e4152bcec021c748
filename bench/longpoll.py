"""10,000 guests long-polling their metadata at once (issue 18): what the waiting connections
cost the workers (memory, CPU while nothing changes), and how soon after the API's commit the
waiting guests have their answers.

One run, on one machine, load generator included:

1. set-up: fresh databases (SQLite, or ``--database postgresql``: a scratch database on the
   local server, where LISTEN/NOTIFY drives the change feed), ``--guests`` servers created
   through the compute API (bench/metadata_storm.py's seeding), then ``cloudseed serve
   --workers 2 --no-compute`` behind a simulated Neutron metadata proxy (signed
   ``X-Instance-ID`` headers), every guest cached in every worker before anything is measured;
2. the workers' RSS and idle CPU with nothing waiting; then one connection per guest (one
   asyncio process, uvloop, a bare ``asyncio.Protocol`` per connection): a plain GET of the
   guest's ``meta_data.json`` for its ETag, then on the same kept-alive connection
   ``?wait_for_change=true&last_etag=TAG&timeout_sec=600``; RSS and idle CPU again with all of
   them waiting;
3. one guest's change: its metadata PUT through the compute API (``--single`` times, a new
   guest each time): from the PUT's answer to that guest's answer, and no other guest woken;
4. everyone's change: ``PUT /v2.1/os-project-keys/bench`` (2.106), which gives every server
   of the project a new key in one transaction per cell: the answers' arrival from the PUT's
   answer, first to last; every answer must be 200 with a new ETag, and nothing refused.

Usage (repository root, the project's venv)::

    .venv/bin/python bench/longpoll.py [--guests 10000] [--database sqlite|postgresql]
        [--state DIR] [--write docs/benchmarks.md]

``--write`` replaces the section between ``<!-- bench:longpoll-<database>:start -->`` and
``<!-- bench:longpoll-<database>:end -->``, adding it when absent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import httpx
import storm_identity
import uvloop
from login_keys import CAPACITY, public_key
from longpoll_report import Phase, Report, section
from report import write_section
from storm_host import load_average, step
from storm_identity import proxy_headers
from storm_seeding import seeded_state
from storm_server import Server, running_server
from storm_workers import connections_by_worker, cpu_seconds, fill_every_worker, rss_kib

# The scratch PostgreSQL database comes from the test suite's helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import databases

PATH = "/openstack/latest/meta_data.json"
ADMIN = {
    "X-Auth-Token": f"admin:{storm_identity.PROJECT}",
    "OpenStack-API-Version": "compute 2.106",
}
WAIT_SEC = 600  # longer than the run: no waiter times out while measured
CONNECTING = 256  # connections being opened and given their first GET at once


@dataclass
class Answer:
    status: int
    etag: bytes
    body: bytes
    at: float  # perf_counter when its first byte arrived


class Guest(asyncio.Protocol):
    """One guest's kept-alive connection: one request at a time, its answer parsed when whole
    (a protocol, not a stream and a task: 10,000 of them must stay cheap in this process).
    ``tag`` is the ETag it has, ``waiting`` its long-poll's answer to come."""

    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.first: float | None = None
        self.answer: asyncio.Future[Answer] | None = None
        self.tag = b""
        self.waiting: asyncio.Future[Answer] | None = None
        headers = proxy_headers(instance_id)
        self.head = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)

    def request(self, target: str) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self.answer = asyncio.get_running_loop().create_future()
        self.transport.write(
            b"GET %s HTTP/1.1\r\nHost: 169.254.169.254\r\n%s\r\n" % (target.encode(), self.head)
        )
        return self.answer

    def wait(self, tag: bytes) -> None:
        """Long-poll for a document whose tag is not ``tag``."""
        self.tag = tag
        bare = tag.strip(b'"').decode()
        self.waiting = self.request(
            f"{PATH}?wait_for_change=true&last_etag={bare}&timeout_sec={WAIT_SEC}"
        )

    def data_received(self, data: bytes) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = self.buffer[:end].split(b"\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get(b"content-length", b"0"))
        if len(self.buffer) < end + 4 + length:
            return
        body = self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        at, self.first = self.first, None
        answer = Answer(int(lines[0].split()[1]), headers.get(b"etag", b""), body, at)
        if self.answer is not None and not self.answer.done():
            self.answer.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.answer is not None and not self.answer.done():
            self.answer.set_exception(ConnectionError(f"{self.instance_id}: closed ({exc})"))


def processes(server: Server) -> dict[str, int]:
    named = {"parent": server.process.pid}
    named.update({f"worker {i}": pid for i, pid in enumerate(server.worker_pids(), 1)})
    return named


def measure(server: Server, seconds: float) -> Phase:
    """RSS now, and CPU over ``seconds`` in which nothing is asked of the server."""
    pids = processes(server)
    rss = {name: rss_kib(pid) for name, pid in pids.items()}
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    cpu = {name: (cpu_seconds(pid) - before[name]) / seconds for name, pid in pids.items()}
    return Phase(rss, cpu)


def raise_fd_limit(needed: int) -> tuple[int, int]:
    """This process holds one socket per guest: the soft limit up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft < needed:
        sys.exit(f"{needed} connections need more file descriptors than the limit, {soft}")
    return soft, hard


async def connect(port: int, instances: list[str], report: Report) -> dict[str, Guest]:
    """One waiting long-poll per guest, on a connection that first GETs the document for its
    tag (and so also lands in the worker the long-poll will wait in)."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(CONNECTING)
    guests: dict[str, Guest] = {}

    async def arm(instance_id: str) -> None:
        async with gate:
            _, guest = await loop.create_connection(lambda: Guest(instance_id), "127.0.0.1", port)
            first = await guest.request(PATH)
            report.statuses[first.status] += 1
            if first.status != 200:
                raise RuntimeError(f"GET {PATH} for {instance_id}: {first.status}")
            guest.wait(first.etag)
            guests[instance_id] = guest

    await asyncio.gather(*(arm(i) for i in instances))
    await asyncio.sleep(2)  # a long-poll refused or answered at once shows by now
    early = [g.waiting for g in guests.values() if g.waiting is not None and g.waiting.done()]
    if early:
        answered = Counter(f.result().status for f in early if f.exception() is None)
        report.refused += answered.get(503, 0)
        raise RuntimeError(f"{len(early)} long-polls answered at once: {dict(answered)}")
    return guests


async def change_one(
    api: httpx.AsyncClient, guests: dict[str, Guest], instance_id: str, trial: int
) -> tuple[float, float]:
    """One guest's metadata changed: ms from the PUT's start and from its answer to the
    guest's answer (negative: the waiter in the API's own worker was woken in-process by the
    commit and answered before the API did)."""
    guest = guests[instance_id]
    assert guest.waiting is not None
    value = f"changed-{trial}"
    started = time.perf_counter()
    r = await api.put(f"/v2.1/servers/{instance_id}/metadata/role", json={"meta": {"role": value}})
    answered = time.perf_counter()
    if r.status_code != 200:
        raise RuntimeError(f"PUT metadata: {r.status_code} {r.text[:300]}")
    answer = await asyncio.wait_for(guest.waiting, 30)
    if answer.status != 200 or value.encode() not in answer.body or answer.etag == guest.tag:
        raise RuntimeError(f"{instance_id}: {answer.status} {answer.body[:200]!r}")
    guest.wait(answer.etag)
    return (answer.at - started) * 1000, (answer.at - answered) * 1000


async def change_all(api: httpx.AsyncClient, guests: dict[str, Guest], report: Report) -> None:
    """Every guest's keys changed in one PUT: when each answer came, after the PUT's answer."""
    # A key pair of the project's user that the servers do not have yet (storm-key, their
    # own, would be stored once and change nothing).
    r = await api.post(
        "/v2.1/os-keypairs",
        headers={**storm_identity.AUTH, "OpenStack-API-Version": "compute 2.10"},
        json={"keypair": {"name": "team-key", "public_key": public_key("team@bench")}},
    )
    if r.status_code not in (200, 201):
        raise RuntimeError(f"POST os-keypairs: {r.status_code} {r.text[:300]}")
    waits = {i: g.waiting for i, g in guests.items() if g.waiting is not None}
    started = time.perf_counter()
    r = await api.put(
        f"/v2.1/os-project-keys/{storm_identity.PROJECT}",
        json={"project_keys": [{"name": "team-key", "user_id": storm_identity.PROJECT}]},
        timeout=600,
    )
    answered = time.perf_counter()
    if r.status_code != 200:
        raise RuntimeError(f"PUT os-project-keys: {r.status_code} {r.text[:300]}")
    report.put_ms = (answered - started) * 1000
    try:
        done = await asyncio.wait_for(asyncio.gather(*waits.values(), return_exceptions=True), 300)
    except TimeoutError:
        answered = sum(1 for f in waits.values() if f.done())
        raise RuntimeError(f"after 300 s, {answered} of {len(waits)} waiters answered") from None
    for instance_id, answer in zip(waits, done, strict=True):
        if isinstance(answer, BaseException):
            report.statuses[0] += 1
            continue
        report.statuses[answer.status] += 1
        report.refused += answer.status == 503
        report.same_tag += answer.etag == guests[instance_id].tag
        report.fan_out.append((answer.at - answered) * 1000)
    report.fan_out.sort()


async def waiting_phase(
    args: argparse.Namespace, server: Server, instances: list[str], report: Report
) -> None:
    started = time.perf_counter()
    guests = await connect(server.metadata_port, instances, report)
    report.connect_seconds = time.perf_counter() - started
    by_pid = connections_by_worker(server)
    report.per_worker = {
        name: by_pid.get(pid, 0) for name, pid in processes(server).items() if name != "parent"
    }
    print(f"  {len(guests):,} waiting after {report.connect_seconds:.1f} s: {report.per_worker}")
    report.loads.append(load_average())
    report.waiting = await asyncio.to_thread(measure, server, args.idle_seconds)
    async with httpx.AsyncClient(base_url=server.api, headers=ADMIN, timeout=60) as api:
        done = step(f"{args.single} single changes, one guest each")
        # Spread over the list, so both workers' connections are among them.
        chosen = instances[:: max(1, len(instances) // args.single)][: args.single]
        for trial, instance_id in enumerate(chosen):
            report.single.append(await change_one(api, guests, instance_id, trial))
            await asyncio.sleep(0.3)
        report.woken_others = sum(
            1
            for i, g in guests.items()
            if i not in chosen and g.waiting is not None and g.waiting.done()
        )
        done()
        report.loads.append(load_average())
        done = step("one change for everyone: PUT os-project-keys (2.106)")
        await change_all(api, guests, report)
        done()
    for guest in guests.values():
        if guest.transport is not None:
            guest.transport.close()


@contextlib.contextmanager
def database(kind: str, tmp: Path) -> Iterator[None]:
    """The cloudseed databases for the run: SQLite in the state directory, or a scratch
    PostgreSQL database (API and cell share it), dropped afterwards."""
    if kind == "sqlite":
        yield
        return
    names = ("CLOUDSEED_DATABASE__CONNECTION", "CLOUDSEED_API_DATABASE__CONNECTION")
    with databases.scratch_database(kind, str(tmp)) as url:
        os.environ.update(dict.fromkeys(names, url))
        try:
            yield
        finally:
            for name in names:
                del os.environ[name]


def run(args: argparse.Namespace, tmp: Path, report: Report) -> None:
    report.database = args.database
    report.fd_limit = raise_fd_limit(args.guests + 100)
    seeding_args = argparse.Namespace(
        instances=args.guests,
        workers=args.workers,
        batch=args.batch,
        create_concurrency=2,
        state=args.state,
    )
    data_dir, seeding = seeded_state(seeding_args, tmp)
    report.seeded = len(seeding.instances)
    report.seeding_seconds = seeding.active_seconds
    instances = seeding.instances[: args.guests]
    report.guests = len(instances)
    with running_server(data_dir, args.workers, compute=False) as server:
        done = step("every guest into every worker")
        fill_every_worker(server, instances, [PATH])
        done()
        time.sleep(6)  # the fill's connections closed, uvicorn's keep-alive over
        report.loads.append(load_average())
        done = step(f"nothing waiting: RSS, and CPU over {args.idle_seconds} s")
        report.idle = measure(server, args.idle_seconds)
        done()
        done = step(f"{len(instances):,} guests long-polling, one connection each")
        uvloop.run(waiting_phase(args, server, instances, report))
        done()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guests", type=int, default=10_000)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=200, help="servers per multi-create")
    parser.add_argument("--idle-seconds", type=int, default=20, help="CPU window, each phase")
    parser.add_argument("--single", type=int, default=10, help="one-guest changes")
    parser.add_argument(
        "--state",
        metavar="DIR",
        type=Path,
        help="SQLite only: keep the seeded databases here and reuse them (as metadata_storm)",
    )
    parser.add_argument("--write", metavar="PATH", type=Path)
    args = parser.parse_args(argv)
    if args.state is not None and args.database != "sqlite":
        parser.error("--state is for SQLite only (the PostgreSQL database is a scratch one)")
    if min(args.guests, args.workers, args.idle_seconds, args.single) < 1:
        parser.error("counts and durations must be positive")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    os.environ.update(CAPACITY)
    report = Report()
    with (
        tempfile.TemporaryDirectory(prefix="cloudseed-longpoll-") as tmp,
        database(args.database, Path(tmp)),
    ):
        run(args, Path(tmp), report)
    text = section(args, report, path=PATH, wait_sec=WAIT_SEC)
    print(text)
    if args.write is not None:
        markers = (
            f"<!-- bench:longpoll-{args.database}:start -->",
            f"<!-- bench:longpoll-{args.database}:end -->",
        )
        write_section(args.write, *markers, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
