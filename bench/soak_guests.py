"""The soak's guests: one coroutine per server reading its metadata through a simulated Neutron
metadata proxy (``X-Instance-ID`` signed with ``[neutron] metadata_proxy_shared_secret``), as
cloud-init and agents in the guests would.

A share of the guests (``waiter_share``) hold a long-poll all the time: ``meta_data.json`` for
its ETag, then ``?wait_for_change=true&last_etag=TAG&timeout_sec=N`` and, when the answer has a
new tag, its ``user_data`` (what an agent reacting to a change would read). The others read
``meta_data.json`` and one more document (``user_data``, the EC2 keys, ``network_data.json``)
every ``read_period`` seconds, starting at a random moment.

A guest of a server created during the run may be answered 404 (not built yet, or deleted);
a guest of a seeded server never: that is recorded as a fault. A guest stops after its
server's deletion has been answered 404.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from soak_ledger import NO_KEEPALIVE, Ledger
from soak_load import sleep_unless

META_DATA = "/openstack/latest/meta_data.json"
OTHER_DOCUMENTS = (
    "/openstack/latest/user_data",
    "/latest/meta-data/public-keys/",
    "/openstack/latest/network_data.json",
)


def proxy_headers(secret: str, project: str, instance_id: str) -> dict[str, str]:
    """What the Neutron metadata proxy adds to a guest's request."""
    signature = hmac.new(secret.encode(), instance_id.encode(), hashlib.sha256).hexdigest()
    return {
        "X-Instance-ID": instance_id,
        "X-Tenant-ID": project,
        "X-Instance-ID-Signature": signature,
    }


@dataclass
class GuestFleet:
    metadata_url: str
    secret: str
    project: str
    ledger: Ledger
    rng: random.Random
    read_period: float
    wait_range: tuple[int, int]  # a long-poll's timeout_sec, drawn in this range
    waiter_share: float
    seeded: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)  # deletion accepted
    pending: list[str] = field(default_factory=list)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    long_polls: Counter[str] = field(default_factory=Counter)  # woken, timed out
    client: httpx.AsyncClient | None = None
    stopping: asyncio.Event | None = None

    def add(self, server_id: str, *, seeded: bool) -> None:
        if seeded:
            self.seeded.add(server_id)
        if self.client is None:
            self.pending.append(server_id)
        else:
            self._start(server_id)

    def deleted(self, server_id: str) -> None:
        self.gone.add(server_id)

    def waiters(self) -> int:
        return sum(1 for server_id in self.tasks if self._waits(server_id))

    def _waits(self, server_id: str) -> bool:
        # The same guests wait in every run: a digest of the id, not the order of creation.
        return int(server_id.replace("-", "")[:8], 16) / 0xFFFFFFFF < self.waiter_share

    def _start(self, server_id: str) -> None:
        behaviour = self._waiter if self._waits(server_id) else self._reader
        self.tasks[server_id] = asyncio.ensure_future(behaviour(server_id))

    async def run(self, stopping: asyncio.Event) -> None:
        self.stopping = stopping
        limits = httpx.Limits(
            max_connections=None,
            max_keepalive_connections=NO_KEEPALIVE,
        )
        timeout = httpx.Timeout(60.0, read=self.wait_range[1] + 60.0)
        async with httpx.AsyncClient(
            base_url=self.metadata_url, limits=limits, timeout=timeout
        ) as client:
            self.client = client
            for server_id in self.pending:
                self._start(server_id)
            self.pending.clear()
            await stopping.wait()
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            self.client = None

    async def _get(self, server_id: str, path: str, kind: str) -> httpx.Response | None:
        assert self.client is not None
        started = time.time()
        try:
            response = await self.client.get(
                path, headers=proxy_headers(self.secret, self.project, server_id)
            )
        except httpx.TransportError as exc:
            self.ledger.failure("guest", kind, exc, started)
            return None
        status = response.status_code
        detail = f"{server_id} {path}: {response.text[:200]}" if status >= 500 else ""
        self.ledger.answer("guest", kind, status, started, detail)
        if status == 404 and kind == "meta_data.json" and server_id in self.seeded:
            self.ledger.shape_fault(
                "guest", kind, f"seeded guest {server_id} answered 404", started
            )
        return response

    def _over(self, server_id: str, response: httpx.Response | None) -> bool:
        """Whether this guest is done: its server's deletion has been answered."""
        return response is not None and response.status_code == 404 and server_id in self.gone

    async def _reader(self, server_id: str) -> None:
        assert self.stopping is not None
        if await sleep_unless(self.stopping, self.rng.uniform(0, self.read_period)):
            return
        while True:
            response = await self._get(server_id, META_DATA, "meta_data.json")
            if self._over(server_id, response):
                return
            path = self.rng.choice(OTHER_DOCUMENTS)
            await self._get(server_id, path, path.rsplit("/", 2)[-2 if path.endswith("/") else -1])
            if await sleep_unless(self.stopping, self.read_period * self.rng.uniform(0.8, 1.2)):
                return

    async def _waiter(self, server_id: str) -> None:
        assert self.stopping is not None
        if await sleep_unless(self.stopping, self.rng.uniform(0, 2)):
            return
        while not self.stopping.is_set():
            response = await self._get(server_id, META_DATA, "meta_data.json")
            if self._over(server_id, response):
                return
            tag = response.headers.get("etag", "") if response is not None else ""
            if response is None or response.status_code != 200 or not tag:
                if await sleep_unless(self.stopping, 1):
                    return
                continue
            timeout = self.rng.randint(*self.wait_range)
            query = f"?wait_for_change=true&last_etag={tag.strip(chr(34))}&timeout_sec={timeout}"
            answer = await self._get(server_id, META_DATA + query, "long-poll")
            if answer is None or answer.status_code != 200:
                if self._over(server_id, answer) or await sleep_unless(self.stopping, 1):
                    return
                continue
            if answer.headers.get("etag") != tag:
                self.long_polls["woken"] += 1
                await self._get(server_id, OTHER_DOCUMENTS[0], "user_data")
            else:
                self.long_polls["timed out"] += 1
