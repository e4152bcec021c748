"""Long-polls on a real `cloudseed serve --workers 2` (its own process, random loopback ports)
on PostgreSQL: a change committed through the API node (another process) wakes the guests
waiting in both workers within 100 ms of its commit (NOTIFY; the fallback read is a minute
away), 500 waiting connections cost little memory, and SIGTERM answers every waiter at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import select

from cloudseed.db.engines import Database
from cloudseed.servers.models import Instance
from cloudseed.signing import sign
from tests.support import databases
from tests.support.cluster import ADMIN, Cluster, healthy, running_cluster, wait
from tests.support.metrics import scrape, value
from tests.support.ports import free_port
from tests.support.waiting import wait_until

SECRET = "proxy-secret"
WAITERS = 500
PATH = "/openstack/latest/meta_data.json"


@dataclass
class Answer:
    status: int
    etag: str
    body: dict[str, Any]


def worker_pids(parent: int) -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            pids.append(int(stat.parent.name))
    return pids


def rss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def committed_at(cluster: Cluster, uuid: str) -> float:
    """When the change was written (``guest_changed`` stamps updated_at just before the
    commit): a lower bound of the commit's time, so answer - this bounds the wake-up."""
    db = Database.connect("cell", cluster.url)
    try:
        with db.read() as session:
            stamp = session.scalar(select(Instance.updated_at).where(Instance.uuid == uuid))
    finally:
        db.dispose()
    assert stamp is not None
    return stamp.replace(tzinfo=dt.UTC).timestamp()


async def all_waiting(md: str, count: int) -> None:
    """Return once ``count`` long-polls wait in serve's workers (the waiters gauge, summed
    over them): a change from now on must wake them all."""

    def waiting() -> bool:
        return value(scrape(md), "cloudseed_metadata_waiters") == count

    await asyncio.to_thread(wait_until, waiting, what=f"{count} long-polls waiting")


@pytest.mark.parametrize("backend", ["postgresql"])
def test_long_polls_on_two_workers(backend: str, tmp_path: Path) -> None:
    try:
        with running_cluster(backend, tmp_path) as cluster:
            _long_polls(cluster)
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))


def _long_polls(cluster: Cluster) -> None:
    api_port, md_port = free_port(), free_port()
    serve = cluster.start(
        "metadata",
        "serve",
        "--no-compute",
        "--workers",
        "2",
        "--api-listen",
        f"127.0.0.1:{api_port}",
        "--metadata-listen",
        f"127.0.0.1:{md_port}",
        CLOUDSEED_NEUTRON__SERVICE_METADATA_PROXY="true",
        CLOUDSEED_NEUTRON__METADATA_PROXY_SHARED_SECRET=SECRET,
        CLOUDSEED_METADATA__CHANGE_FALLBACK_INTERVAL_MS="60000",
        CLOUDSEED_METADATA__MAX_WAITERS_PER_INSTANCE=str(WAITERS * 2),
    )
    wait(lambda: healthy(f"http://127.0.0.1:{api_port}"), 60, cluster, "serve answering")
    body = {"server": {"name": "vm", "imageRef": "cirros", "flavorRef": "1", "networks": "none"}}
    r = httpx.post(f"{cluster.api}/v2.1/servers", json=body, headers=ADMIN, timeout=10)
    assert r.status_code == 202, r.text
    uuid = r.json()["server"]["id"]
    guest = {
        "X-Instance-ID": uuid,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, uuid),
    }
    md = f"http://127.0.0.1:{md_port}"
    workers = worker_pids(serve.pid)
    assert len(workers) == 2

    def rename(name: str) -> None:
        r = httpx.put(
            f"{cluster.api}/v2.1/servers/{uuid}",
            json={"server": {"name": name}},
            headers=ADMIN,
            timeout=10,
        )
        assert r.status_code == 200, r.text

    async def main() -> None:
        limits = httpx.Limits(max_connections=WAITERS + 50, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=md, headers=guest, limits=limits, timeout=60) as c:
            # Each worker has the guest cached (a few plain requests land on both).
            for _ in range(10):
                assert (await c.get(PATH)).status_code == 200
            tag = (await c.get(PATH)).headers["etag"]
            query = {"wait_for_change": "true", "last_etag": tag, "timeout_sec": "120"}

            async def waiting() -> tuple[float, Answer]:
                # A plain socket rather than httpx: this process reads hundreds of answers at
                # once, and the time measured should be the service's, not the client's.
                reader, writer = await asyncio.open_connection("127.0.0.1", md_port)
                head = "".join(f"{k}: {v}\r\n" for k, v in guest.items())
                writer.write(f"GET {PATH}?{urlencode(query)} HTTP/1.1\r\n{head}\r\n".encode())
                raw = await reader.readuntil(b"\r\n\r\n")
                at = time.time()
                headers = dict(
                    line.split(": ", 1) for line in raw.decode().lower().split("\r\n")[1:-2]
                )
                body = await reader.readexactly(int(headers["content-length"]))
                writer.close()
                return at, Answer(int(raw.split()[1]), headers["etag"], json.loads(body))

            # 1. The wake-up, twenty connections spread over both workers by SO_REUSEPORT: a
            # first round warms what runs once per process (feed query, SQL compilation),
            # then seven are measured. The median is held to 100 ms and every round to 500:
            # the test machine's CPUs are shared, and a busy one delays any single round.
            latencies = []
            for round in range(8):
                tasks = [asyncio.ensure_future(waiting()) for _ in range(20)]
                await all_waiting(md, 20)
                assert not any(t.done() for t in tasks)
                name = f"round-{round}"
                await asyncio.to_thread(rename, name)
                answers = await asyncio.gather(*tasks)
                # Read afterwards, so this process does nothing else while the answers come.
                commit = committed_at(cluster, uuid)
                assert all(r.status == 200 and r.body["name"] == name for _, r in answers)
                if round:
                    latencies.append(max(at for at, _ in answers) - commit)
                query["last_etag"] = answers[0][1].etag
            shown = ", ".join(f"{t * 1000:.0f}" for t in latencies)
            print(f"wake-up after commit, 20 waiters on 2 workers, last answer: {shown} ms")
            assert statistics.median(latencies) < 0.1
            assert max(latencies) < 0.5

            # 2. Many waiting connections: memory per waiter, then one change answers all.
            before = rss_kib(workers)
            tasks = [asyncio.ensure_future(waiting()) for _ in range(WAITERS)]
            await all_waiting(md, WAITERS)
            assert not any(t.done() for t in tasks)
            during = rss_kib(workers)
            per_waiter = (during - before) * 1024 / WAITERS
            print(
                f"{WAITERS} waiters: workers' RSS {before} -> {during} KiB, {per_waiter:.0f} B each"
            )
            assert per_waiter < 40_000
            await asyncio.to_thread(rename, "second")
            answers = await asyncio.gather(*tasks)
            commit = committed_at(cluster, uuid)
            latency = max(at for at, _ in answers) - commit
            print(f"wake-up after commit, {WAITERS} waiters: last answer {latency * 1000:.1f} ms")
            assert all(r.status == 200 and r.body["name"] == "second" for _, r in answers)
            assert latency < 0.5
            query["last_etag"] = answers[0][1].etag

            # 3. SIGTERM: the waiters are answered with the document as it is, at once.
            tasks = [asyncio.ensure_future(waiting()) for _ in range(10)]
            await all_waiting(md, 10)
            stopped = time.time()
            serve.send_signal(signal.SIGTERM)
            answers = await asyncio.gather(*tasks)
            assert all(r.status == 200 and r.body["name"] == "second" for _, r in answers)
            assert max(at for at, _ in answers) - stopped < 2

    try:
        asyncio.run(main())
    except BaseException:
        # Stopped with SIGTERM here too: the cluster's SIGKILL would orphan the workers.
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
        raise
    assert serve.wait(timeout=60) == 0, cluster.logs()
