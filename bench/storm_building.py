"""Servers created and built while the storm's guests read their metadata: the boot storm as
an operator meets it, where the first guests boot while later ones are still being created
through the API and built by the agent in the same processes (``--building N``).

``BuildLoad`` posts multi-creates of ``N`` more servers (from the registries the seeded
servers came from) in a thread of its own while a paced pass runs, then reports how long the
creates took and how many servers were still building when the pass ended. The servers stay
in the state directory until the next run on it, which deletes them before it measures
(``remove_earlier_builds``): left there, each run added ``N`` until the one fake host was full
and a later run's creates all failed ("No valid host") while the pass measured them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import storm_identity
from storm_host import step
from storm_seeding import Registries, all_server_ids, count_servers, create_batches
from storm_server import running_server

DELETES_IN_FLIGHT = 8
BATCH = 100  # servers per multi-create: the creates spread over the pass instead of one burst
WAIT_SECONDS = 600


@dataclass
class BuildReport:
    servers: int
    create_seconds: float = 0.0  # from the first POST to the last answer
    building_at_end: int = 0  # BUILD when the pass ended (at most 1,000: one page)
    all_active_seconds: float = 0.0  # from the first POST until none was BUILD
    refusals: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # the new servers' ids


def registries_of(api: httpx.Client, server_id: str) -> Registries:
    """The image, flavor and network a seeded server was made from (a reused state keeps no
    record of them): its own view at 2.1 (flavor by id), and the network slice by name."""
    server = api.get(f"/v2.1/servers/{server_id}").json()["server"]
    (network_name,) = server["addresses"]
    found = api.get("/network/v2.0/networks", params={"name": network_name}).json()
    (network,) = found["networks"]
    return Registries(
        image=server["image"]["id"], flavor=server["flavor"]["id"], network=network["id"]
    )


class BuildLoad:
    """``with BuildLoad(api_base, seeded_id, n) as load:`` run the pass; ``load.report``."""

    def __init__(self, api_base: str, seeded_id: str, servers: int) -> None:
        self.api_base = api_base
        self.report = BuildReport(servers)
        with httpx.Client(base_url=api_base, headers=storm_identity.AUTH, timeout=60) as api:
            self.registries = registries_of(api, seeded_id)
            self._before = set(all_server_ids(api))
        self._thread = threading.Thread(target=self._create, name="storm-builds", daemon=True)
        self._error: BaseException | None = None
        self._started = 0.0

    def _create(self) -> None:
        try:
            _seconds, self.report.refusals = asyncio.run(
                create_batches(
                    self.api_base, self.registries, "storm-key", self.report.servers, BATCH, 1
                )
            )
            self.report.create_seconds = time.perf_counter() - self._started
        except BaseException as exc:  # reported by __exit__, in the benchmark's thread
            self._error = exc

    def __enter__(self) -> BuildLoad:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with httpx.Client(base_url=self.api_base, headers=storm_identity.AUTH, timeout=60) as api:
            self.report.building_at_end = count_servers(api, "BUILD")
            self._thread.join(timeout=WAIT_SECONDS)
            if self._error is not None:
                raise RuntimeError(f"creating servers during the pass: {self._error}")
            # Later passes (idle, change visibility) measure a server with nothing to build.
            deadline = time.monotonic() + WAIT_SECONDS
            while count_servers(api, "BUILD"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"servers still building {WAIT_SECONDS} s after the pass")
                time.sleep(0.5)
            self.report.all_active_seconds = time.perf_counter() - self._started
            errors = count_servers(api, "ERROR")
            if errors:
                raise RuntimeError(f"{errors} servers built during the pass went to ERROR")
            self.report.created = [i for i in all_server_ids(api) if i not in self._before]


def remove_earlier_builds(data_dir: Path, workers: int, seeded: set[str]) -> int:
    """Delete every server of the state but the ``seeded`` ones (earlier runs' builds, and
    their failures), on a server of its own, and wait until they are gone; return how many."""
    with (
        running_server(data_dir, workers) as server,
        httpx.Client(base_url=server.api, headers=storm_identity.AUTH, timeout=60) as api,
    ):
        others = [i for i in all_server_ids(api) if i not in seeded]
        if not others:
            return 0
        done = step(f"deleting {len(others):,} servers earlier runs built in this state")
        asyncio.run(_delete(server.api, others))
        deadline = time.monotonic() + WAIT_SECONDS
        while len(all_server_ids(api)) > len(seeded):
            if time.monotonic() > deadline:
                raise RuntimeError(f"servers still there {WAIT_SECONDS} s after their delete")
            time.sleep(0.5)
        done()
    return len(others)


async def _delete(api_base: str, ids: list[str]) -> None:
    pending = iter(ids)  # shared: each server is deleted once

    async def client_loop(client: httpx.AsyncClient) -> None:
        for server_id in pending:
            response = await client.delete(f"/v2.1/servers/{server_id}")
            if response.status_code not in (204, 404):
                raise RuntimeError(f"DELETE {server_id}: {response.status_code} {response.text}")

    async with httpx.AsyncClient(
        base_url=api_base, headers=storm_identity.AUTH, timeout=60
    ) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(DELETES_IN_FLIGHT)))
