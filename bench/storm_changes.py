"""Change visibility: user data changed through the compute API (2.105), then polled on
connections known to belong to each worker until every worker serves the new value."""

from __future__ import annotations

import asyncio
import base64
import math
import time
import uuid
from dataclasses import dataclass

import httpx
import storm_identity
from storm_identity import proxy_headers
from storm_raw_http import RawConnection
from storm_seeding import USER_DATA
from storm_server import Server
from storm_workers import connections_per_worker


@dataclass
class ChangeTrial:
    put_ms: float
    visible_ms: dict[int, float]  # worker pid -> ms after the PUT's answer


async def _one_change(
    api: httpx.AsyncClient,
    instance_id: str,
    path: str,
    owned: dict[int, list[RawConnection]],
    trial: int,
) -> ChangeTrial:
    new = USER_DATA + f"# change {trial} {uuid.uuid4()}\n".encode()
    headers = proxy_headers(instance_id)
    started = time.perf_counter()
    response = await api.put(
        f"/v2.1/servers/{instance_id}",
        json={"server": {"user_data": base64.b64encode(new).decode()}},
    )
    answered = time.perf_counter()
    if response.status_code != 200:
        raise RuntimeError(f"PUT user_data: {response.status_code} {response.text[:300]}")
    seen: dict[int, float] = {}

    async def poll(pid: int, conn: RawConnection) -> None:
        while time.perf_counter() - answered < 5:
            status, body = await conn.get(path, headers)
            if status == 200 and body == new:
                # A worker has changed when its last connection sees the new value.
                seen[pid] = max(seen.get(pid, 0.0), (time.perf_counter() - answered) * 1000)
                return
        seen[pid] = math.inf

    await asyncio.gather(*(poll(pid, c) for pid, conns in owned.items() for c in conns))
    return ChangeTrial((answered - started) * 1000, seen)


async def _change_visibility(
    server: Server, api_base: str, instance_id: str, trials: int
) -> list[ChangeTrial]:
    path = "/openstack/latest/user_data"
    owned = await connections_per_worker(server, instance_id, path, per_worker=4)
    headers = {**storm_identity.AUTH, "OpenStack-API-Version": "compute 2.105"}
    results = []
    try:
        async with httpx.AsyncClient(base_url=api_base, headers=headers, timeout=30) as api:
            for trial in range(trials):
                results.append(await _one_change(api, instance_id, path, owned, trial))
                await asyncio.sleep(0.2)  # lets the feed pollers drift to a new phase
    finally:
        for conns in owned.values():
            for conn in conns:
                await conn.close()
    return results


def measure_change_visibility(
    server: Server, instance_id: str, trials: int, *, api_base: str | None = None
) -> list[ChangeTrial]:
    """``trials`` user data changes made through ``api_base`` (None: ``server``'s own API),
    each polled for in every worker of ``server``."""
    return asyncio.run(_change_visibility(server, api_base or server.api, instance_id, trials))
