"""The soak's users: concurrent clients of the compute API creating, rebuilding and deleting
servers, changing their user data, their keys (2.106's ``key_names``) and their metadata, and
creating and deleting key pairs, at a steady rate; and what each server should hold afterwards.

Every request's answer goes to the ledger. What a server should hold is kept per field as the
set of values it may end with: a change the API accepted (2xx) makes its value the only one; a
change whose fate is unknown (a 5xx, or a reset before the answer) adds its value to the set; a
refusal (4xx: the server is busy with a task, or deleted) changes nothing. Two clients never
act on one server at once, so each server's changes have one order.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from soak_ledger import NO_KEEPALIVE, Ledger

VERSION = "compute 2.106"
USER = "soak"
PROJECT = "soak"
KEY_POOL = tuple(f"soak-key-{n}" for n in range(6))
META_KEYS = ("role", "tier", "zone", "owner", "build")


async def sleep_unless(stopping: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` unless told to stop first; True: stop."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), max(0.0, seconds))
    return stopping.is_set()


class Guests(Protocol):
    """The guest fleet as the users see it (bench/soak_guests.py)."""

    def add(self, server_id: str, *, seeded: bool) -> None: ...

    def deleted(self, server_id: str) -> None: ...


@dataclass
class Tracked:
    """A server of the soak's project as its users know it."""

    id: str
    name: str
    seeded: bool
    # field -> the canonical values it may end with (metadata, user_data, key_names)
    expect: dict[str, set[str]] = field(default_factory=dict)
    deleted: bool = False  # a deletion was asked for
    deletion_unanswered: bool = False  # ... and got no answer: it may or may not have happened
    busy: bool = False


def canonical_metadata(value: dict[str, str]) -> str:
    return json.dumps(value, sort_keys=True)


def canonical_user_data(value: str | None) -> str:
    return value or ""


def canonical_keys(value: list[str]) -> str:
    return json.dumps(value)


def expectations(
    metadata: dict[str, str], user_data: str | None, keys: list[str]
) -> dict[str, set[str]]:
    return {
        "metadata": {canonical_metadata(metadata)},
        "user_data": {canonical_user_data(user_data)},
        "key_names": {canonical_keys(keys)},
    }


@dataclass
class Users:
    api_url: str
    ledger: Ledger
    guests: Guests
    image_id: str
    rng: random.Random
    concurrency: int
    rate: float  # operations per second, all clients together
    churn_target: int  # servers created (and deleted) during the run, alive at once
    scratch_key: str  # the public key of the key pairs that come and go (never a server's)
    servers: dict[str, Tracked] = field(default_factory=dict)
    accepted: Counter[str] = field(default_factory=Counter)  # definite 2xx by operation
    uncertain: Counter[str] = field(default_factory=Counter)
    uncertain_creates: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # by name
    counter: int = 0

    def track(self, made: dict[str, str], expect: dict[str, set[str]], *, seeded: bool) -> None:
        """Servers made before the load (id: name), each holding ``expect``; the ``seeded``
        ones are never deleted."""
        for server_id, name in made.items():
            self.servers[server_id] = Tracked(
                server_id, name, seeded, {k: set(v) for k, v in expect.items()}
            )

    async def run(self, stopping: asyncio.Event) -> None:
        headers = {"X-Auth-Token": f"{USER}:{PROJECT}", "OpenStack-API-Version": VERSION}
        limits = httpx.Limits(
            max_connections=self.concurrency * 2, max_keepalive_connections=NO_KEEPALIVE
        )
        async with httpx.AsyncClient(
            base_url=self.api_url, headers=headers, timeout=60, limits=limits
        ) as client:
            await asyncio.gather(*(self._client(client, stopping) for _ in range(self.concurrency)))

    async def _client(self, client: httpx.AsyncClient, stopping: asyncio.Event) -> None:
        pause = self.concurrency / self.rate
        while not stopping.is_set():
            started = time.monotonic()
            await self._one(client)
            left = pause * self.rng.uniform(0.5, 1.5) - (time.monotonic() - started)
            await sleep_unless(stopping, left)

    # -- choosing -------------------------------------------------------------------------

    def _churn_alive(self) -> int:
        return sum(1 for s in self.servers.values() if not s.seeded and not s.deleted)

    def _pick(self, *, churn_only: bool = False) -> Tracked | None:
        free = [
            s
            for s in self.servers.values()
            if not s.deleted and not s.busy and (not churn_only or not s.seeded)
        ]
        return self.rng.choice(free) if free else None

    async def _one(self, client: httpx.AsyncClient) -> None:
        # The churn pool was filled while seeding: a create when it is short of its size, else
        # a delete, so the servers alive (and the guests cached) stay level through the run.
        churn = "create" if self._churn_alive() < self.churn_target else "delete"
        weights = {
            churn: 12,
            "rebuild": 8,
            "user_data": 14,
            "key_names": 14,
            "metadata_item": 12,
            "metadata_all": 5,
            "metadata_delete": 5,
            "keypair": 4,
            "read": 10,
        }
        kind = self.rng.choices(list(weights), weights=list(weights.values()))[0]
        if kind == "create":
            await self._create(client)
        elif kind == "keypair":
            await self._keypair(client)
        else:
            server = self._pick(churn_only=kind == "delete")
            if server is None:
                return
            change = {
                "delete": self._delete,
                "rebuild": self._rebuild,
                "user_data": self._change_user_data,
                "key_names": self._change_keys,
                "metadata_item": self._metadata_item,
                "metadata_all": self._metadata_all,
                "metadata_delete": self._metadata_delete,
                "read": self._read,
            }[kind]
            server.busy = True
            try:
                await change(client, server)
            finally:
                server.busy = False

    # -- values -----------------------------------------------------------------------------

    def _user_data(self) -> str | None:
        if self.rng.random() < 0.1:
            return None
        self.counter += 1
        text = f"#cloud-config\n# soak change {self.counter}\nruncmd: [echo {self.rng.random()}]\n"
        return base64.b64encode(text.encode()).decode()

    def _keys(self) -> list[str]:
        return self.rng.sample(KEY_POOL, self.rng.randint(0, 3))

    def _metadata(self) -> dict[str, str]:
        keys = self.rng.sample(META_KEYS, self.rng.randint(0, 3))
        return {k: f"v{self.rng.randint(0, 999)}" for k in keys}

    # -- requests ----------------------------------------------------------------------------

    async def _call(
        self, client: httpx.AsyncClient, kind: str, method: str, url: str, body: Any = None
    ) -> tuple[int | None, Any]:
        """(status, JSON body or None); status None: no answer (recorded as a failure)."""
        started = time.time()
        try:
            response = await client.request(method, url, json=body)
        except httpx.TransportError as exc:
            self.ledger.failure("api", kind, exc, started)
            return None, None
        self.ledger.answer(
            "api", kind, response.status_code, started, f"{method} {url}: {response.text}"
        )
        try:
            parsed = response.json() if response.content else None
        except ValueError:
            parsed = None
        return response.status_code, parsed

    def _settle(
        self, server: Tracked, kind: str, status: int | None, changes: dict[str, str]
    ) -> None:
        """Apply a change's outcome to what the server may hold."""
        if status is not None and 200 <= status < 300:
            self.accepted[kind] += 1
            for name, value in changes.items():
                server.expect[name] = {value}
        elif status is None or status >= 500:
            self.uncertain[kind] += 1
            for name, value in changes.items():
                server.expect[name].add(value)
        elif status == 404:
            self.ledger.shape_fault(
                "api", kind, f"{server.id}: 404 for a server not deleted", time.time()
            )

    async def _create(self, client: httpx.AsyncClient) -> None:
        self.counter += 1
        name = f"soak-churn-{self.counter}"
        metadata, user_data, keys = self._metadata(), self._user_data(), self._keys()
        body: dict[str, Any] = {
            "name": name,
            "imageRef": self.image_id,
            "flavorRef": "1",
            "networks": "auto",
            "key_names": keys,
            "metadata": metadata,
        }
        if user_data is not None:
            body["user_data"] = user_data
        status, answer = await self._call(
            client, "create", "POST", "/v2.1/servers", {"server": body}
        )
        expect = expectations(metadata, user_data, keys)
        if status == 202:
            server_id = answer["server"]["id"]
            self.accepted["create"] += 1
            self.servers[server_id] = Tracked(server_id, name, False, expect)
            self.guests.add(server_id, seeded=False)
        elif status is None or status >= 500:
            self.uncertain["create"] += 1
            self.uncertain_creates[name] = expect

    async def _delete(self, client: httpx.AsyncClient, server: Tracked) -> None:
        status, _ = await self._call(client, "delete", "DELETE", f"/v2.1/servers/{server.id}")
        if status == 204:
            self.accepted["delete"] += 1
            server.deleted = True
            self.guests.deleted(server.id)
        elif status is None or status >= 500:
            self.uncertain["delete"] += 1
            server.deleted = server.deletion_unanswered = True  # the API says at the end
            self.guests.deleted(server.id)
        elif status == 404:
            self._settle(server, "delete", 404, {})

    async def _rebuild(self, client: httpx.AsyncClient, server: Tracked) -> None:
        user_data, keys = self._user_data(), self._keys()
        body = {"rebuild": {"imageRef": self.image_id, "key_names": keys, "user_data": user_data}}
        status, _ = await self._call(
            client, "rebuild", "POST", f"/v2.1/servers/{server.id}/action", body
        )
        changes = {"user_data": canonical_user_data(user_data), "key_names": canonical_keys(keys)}
        self._settle(server, "rebuild", status, changes)

    async def _change_user_data(self, client: httpx.AsyncClient, server: Tracked) -> None:
        user_data = self._user_data()
        body = {"server": {"user_data": user_data}}
        status, _ = await self._call(client, "user_data", "PUT", f"/v2.1/servers/{server.id}", body)
        self._settle(server, "user_data", status, {"user_data": canonical_user_data(user_data)})

    async def _change_keys(self, client: httpx.AsyncClient, server: Tracked) -> None:
        keys = self._keys()
        body = {"server": {"key_names": keys}}
        status, _ = await self._call(client, "key_names", "PUT", f"/v2.1/servers/{server.id}", body)
        self._settle(server, "key_names", status, {"key_names": canonical_keys(keys)})

    async def _metadata_item(self, client: httpx.AsyncClient, server: Tracked) -> None:
        key, value = self.rng.choice(META_KEYS), f"v{self.rng.randint(0, 999)}"
        url = f"/v2.1/servers/{server.id}/metadata/{key}"
        status, _ = await self._call(client, "metadata_item", "PUT", url, {"meta": {key: value}})
        self._settle_each(server, "metadata_item", status, lambda m: {**m, key: value})

    async def _metadata_all(self, client: httpx.AsyncClient, server: Tracked) -> None:
        metadata = self._metadata()
        url = f"/v2.1/servers/{server.id}/metadata"
        status, _ = await self._call(client, "metadata_all", "PUT", url, {"metadata": metadata})
        self._settle(server, "metadata_all", status, {"metadata": canonical_metadata(metadata)})

    async def _metadata_delete(self, client: httpx.AsyncClient, server: Tracked) -> None:
        key = self.rng.choice(META_KEYS)
        url = f"/v2.1/servers/{server.id}/metadata/{key}"
        status, _ = await self._call(client, "metadata_delete", "DELETE", url)
        if status == 404:  # that key was not there: nothing changed
            return
        self._settle_each(
            server, "metadata_delete", status, lambda m: {k: v for k, v in m.items() if k != key}
        )

    def _settle_each(self, server: Tracked, kind: str, status: int | None, change: Any) -> None:
        """A change relative to the current metadata: applied to every value it may have."""
        changed = {
            canonical_metadata(change(json.loads(value))) for value in server.expect["metadata"]
        }
        if status is not None and 200 <= status < 300:
            self.accepted[kind] += 1
            server.expect["metadata"] = changed
        elif status is None or status >= 500:
            self.uncertain[kind] += 1
            server.expect["metadata"] |= changed
        elif status == 404:
            self._settle(server, kind, 404, {})

    async def _read(self, client: httpx.AsyncClient, server: Tracked) -> None:
        status, _ = await self._call(client, "show", "GET", f"/v2.1/servers/{server.id}")
        if status == 404:
            self._settle(server, "show", 404, {})
        await self._call(client, "list", "GET", "/v2.1/servers/detail?limit=20")

    async def _keypair(self, client: httpx.AsyncClient) -> None:
        self.counter += 1
        name = f"soak-scratch-{self.counter}"
        body = {"keypair": {"name": name, "public_key": self.scratch_key}}
        status, _ = await self._call(client, "keypair_create", "POST", "/v2.1/os-keypairs", body)
        if status in (200, 201):
            await self._call(client, "keypair_delete", "DELETE", f"/v2.1/os-keypairs/{name}")
