"""What the soak asserts once the load has stopped and every operation has ended:

1. operations: no instance with a task, no operation pending or running, every failed or
   cancelled one (a delete cancels a pending build) with its reason, every instance action
   event finished, one operation per accepted request;
2. servers: every server the users know is in the API as they left it (each field one of the
   values it may have, bench/soak_load.py), or gone when its deletion was accepted; no server
   nobody asked for; every server ACTIVE, or ERROR with a fault;
3. guests: every live server's guest is served, by each metadata worker, exactly what the API
   says: ``meta_data.json``'s ``uuid``, ``name``, ``meta`` and, on the users' servers,
   ``public_keys`` (the names in order, the material they registered, whose SHA256
   fingerprints are the API's), and ``user_data`` (404 when it has none);
4. the metadata node's gauges: no long-poll left waiting once the guests have gone, no more
   guests cached than servers alive (a deleted guest leaves the cache);
5. processes (bench/soak_resources.py).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from soak_guests import META_DATA, proxy_headers
from soak_load import (
    PROJECT,
    Tracked,
    Users,
    canonical_keys,
    canonical_metadata,
    canonical_user_data,
)
from sqlalchemy import func, select
from storm_raw_http import RawConnection
from storm_workers import owner_of_socket, socket_inode

from cloudseed.db.engines import Database
from cloudseed.servers.models import Instance, InstanceActionEvent, Operation

ADMIN = {"X-Auth-Token": f"admin:{PROJECT}", "OpenStack-API-Version": "compute 2.106"}
USER_DATA = "/openstack/latest/user_data"


@dataclass
class Findings:
    """What the checks found: ``faults`` fail the run, the rest is reported."""

    faults: list[str] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)

    def fault(self, text: str) -> None:
        self.faults.append(text)


def settle(cell_url: str, timeout: float) -> float:
    """Wait until no instance has a task and no operation is open; the seconds it took."""
    db = Database.connect("cell", cell_url)
    began = time.monotonic()
    try:
        while True:
            with db.read() as session:
                busy = session.scalar(
                    select(func.count()).where(
                        Instance.task_state.is_not(None), Instance.deleted == 0
                    )
                )
                open_ops = session.scalar(
                    select(func.count())
                    .select_from(Operation)
                    .where(Operation.state.in_(("pending", "running")))
                )
            if not busy and not open_ops:
                return time.monotonic() - began
            if time.monotonic() - began > timeout:
                raise TimeoutError(
                    f"{busy} instances busy and {open_ops} operations open after {timeout:g} s"
                )
            time.sleep(0.5)
    finally:
        db.dispose()


def check_operations(cell_url: str, users: Users, findings: Findings) -> None:
    db = Database.connect("cell", cell_url)
    try:
        with db.read() as session:
            ops = session.execute(
                select(Operation.kind, Operation.state, Operation.error, Operation.instance_uuid)
            ).all()
            stuck = session.scalar(
                select(func.count()).where(Instance.task_state.is_not(None), Instance.deleted == 0)
            )
            states = Counter(
                session.scalars(select(Instance.vm_state).where(Instance.deleted == 0))
            )
            unfinished = session.scalar(
                select(func.count())
                .select_from(InstanceActionEvent)
                .where(InstanceActionEvent.finish_time.is_(None))
            )
    finally:
        db.dispose()
    by_state = Counter((kind, state) for kind, state, _, _ in ops)
    findings.numbers["operations"] = dict(sorted(by_state.items()))
    findings.numbers["vm_states"] = dict(states)
    open_ops = [o for o in ops if o.state not in ("done", "failed", "cancelled")]
    if open_ops:
        findings.fault(f"{len(open_ops)} operations never ended: {open_ops[:5]}")
    reasonless = [o for o in ops if o.state in ("failed", "cancelled") and not o.error]
    if reasonless:
        findings.fault(f"{len(reasonless)} operations failed without a reason: {reasonless[:5]}")
    if stuck:
        findings.fault(f"{stuck} instances still have a task")
    if unfinished:
        findings.fault(f"{unfinished} instance action events never finished")
    odd = set(states) - {"active", "error"}
    if odd:
        findings.fault(f"instances in states the soak never asks for: {dict(states)}")
    # One operation per accepted request, on the soak's own servers (the fuzzer's have theirs).
    mine = set(users.servers)
    counted = Counter(o.kind for o in ops if o.instance_uuid in mine)
    builds = Counter(o.instance_uuid for o in ops if o.kind == "build")
    unbuilt = [i for i in mine if builds[i] != 1]
    if unbuilt:
        findings.fault(f"{len(unbuilt)} servers without exactly one build: {unbuilt[:5]}")
    for request, kind in (("rebuild", "rebuild"), ("delete", "destroy")):
        low = users.accepted[request]
        high = low + users.uncertain[request]
        if not low <= counted[kind] <= high:
            findings.fault(
                f"{counted[kind]} {kind} operations for {low} accepted {request} requests "
                f"(+{users.uncertain[request]} without an answer)"
            )


def list_servers(api_url: str) -> list[dict[str, Any]]:
    """Every server of every project, as an administrator sees it at 2.106."""
    found: list[dict[str, Any]] = []
    marker = None
    with httpx.Client(base_url=api_url, headers=ADMIN, timeout=120) as client:
        while True:
            params: dict[str, Any] = {"all_tenants": "1", "limit": 500}
            if marker:
                params["marker"] = marker
            r = client.get("/v2.1/servers/detail", params=params)
            r.raise_for_status()
            page = r.json()["servers"]
            found += page
            if len(page) < 500:
                return found
            marker = page[-1]["id"]


def _api_values(server: dict[str, Any]) -> dict[str, str]:
    return {
        "metadata": canonical_metadata(server["metadata"]),
        "user_data": canonical_user_data(server.get("OS-EXT-SRV-ATTR:user_data")),
        "key_names": canonical_keys(server["key_names"]),
    }


def check_servers(listed: list[dict[str, Any]], users: Users, findings: Findings) -> None:
    """The API against what the users did (the soak's project; the fuzzer's servers are
    whatever it made of them)."""
    listed = [s for s in listed if s["tenant_id"] == PROJECT]
    by_id = {s["id"]: s for s in listed}
    statuses = Counter(s["status"] for s in listed)
    findings.numbers["servers"] = dict(statuses)
    for server in listed:
        if server["OS-EXT-STS:task_state"] is not None:
            findings.fault(f"server {server['id']} still {server['OS-EXT-STS:task_state']}")
        if server["status"] == "ERROR" and not (server.get("fault") or {}).get("message"):
            findings.fault(f"server {server['id']} is ERROR without a fault")
        elif server["status"] not in ("ACTIVE", "ERROR"):
            findings.fault(f"server {server['id']} is {server['status']}")
    adopted = 0
    for server in listed:
        if server["id"] in users.servers:
            continue
        expect = users.uncertain_creates.get(server["name"])
        if expect is None:
            findings.fault(f"server {server['id']} ({server['name']}) that nobody created")
            continue
        users.servers[server["id"]] = Tracked(server["id"], server["name"], False, expect)
        adopted += 1
    findings.numbers["adopted"] = adopted
    mismatched = 0
    for tracked in users.servers.values():
        shown = by_id.get(tracked.id)
        if shown is None:
            if not tracked.deleted:
                findings.fault(f"server {tracked.id} ({tracked.name}) vanished")
            continue
        if tracked.deleted and not tracked.deletion_unanswered:
            findings.fault(f"server {tracked.id} still there after its deletion was accepted")
            continue
        if shown["status"] == "ERROR":
            continue  # its last rebuild failed (with the fault above): either value may stand
        for name, value in _api_values(shown).items():
            if value not in tracked.expect[name]:
                mismatched += 1
                findings.fault(
                    f"server {tracked.id} {name}: the API has {value[:80]!r}, the users left "
                    f"one of {sorted(tracked.expect[name])[:3]!r}"
                )
    findings.numbers["lost updates"] = mismatched


def _fingerprint(public_key: str) -> str:
    blob = base64.b64decode(public_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


async def _worker_connections(port: int, workers: list[int]) -> dict[int, RawConnection]:
    """One kept-alive connection accepted by each worker (which one holds it is read from
    /proc, not assumed)."""
    owned: dict[int, RawConnection] = {}
    spare = []
    for _ in range(200):
        if len(owned) == len(workers):
            break
        conn = await RawConnection.open(port)
        await conn.get("/", {})  # accepted and answered
        inode = socket_inode(port, conn.local_port)
        pid = owner_of_socket(inode, workers) if inode is not None else None
        if pid is None or pid in owned:
            spare.append(conn)
        else:
            owned[pid] = conn
    for conn in spare:
        await conn.close()
    if len(owned) != len(workers):
        raise RuntimeError(f"connections to only {len(owned)} of {len(workers)} workers")
    return owned


async def _guest_views(
    port: int, workers: list[int], servers: list[dict[str, Any]], secret: str
) -> list[tuple[int, dict[str, Any], int, bytes, int, bytes]]:
    """(worker, server, meta_data.json status, body, user_data status, body) for each pair."""
    connections = await _worker_connections(port, workers)
    views = []
    try:
        # Each guest of each worker in turn: no connection idles past the server's keep-alive
        # timeout (5 s) while the other worker is asked for thousands of guests.
        for server in servers:
            for pid, conn in connections.items():
                headers = proxy_headers(secret, server["tenant_id"], server["id"])
                md_status, md_body = await conn.get(META_DATA, headers)
                ud_status, ud_body = await conn.get(USER_DATA, headers)
                views.append((pid, server, md_status, md_body, ud_status, ud_body))
    finally:
        for conn in connections.values():
            await conn.close()
    return views


def check_guests(
    servers: list[dict[str, Any]],
    *,
    metadata_port: int,
    workers: list[int],
    secret: str,
    keys: dict[str, str],
    findings: Findings,
) -> None:
    views = asyncio.run(_guest_views(metadata_port, workers, servers, secret))
    wrong = 0
    for pid, server, md_status, md_body, ud_status, ud_body in views:
        problems = _guest_problems(server, md_status, md_body, ud_status, ud_body, keys)
        if problems:
            wrong += 1
            findings.fault(f"guest {server['id']} on worker {pid}: {'; '.join(problems)}")
    findings.numbers["guest views checked"] = len(views)
    findings.numbers["guest views wrong"] = wrong


def _guest_problems(
    server: dict[str, Any],
    md_status: int,
    md_body: bytes,
    ud_status: int,
    ud_body: bytes,
    keys: dict[str, str],
) -> list[str]:
    if md_status != 200:
        return [f"meta_data.json {md_status}"]
    served = json.loads(md_body)
    problems = []
    if served.get("uuid") != server["id"] or served.get("name") != server["name"]:
        problems.append(f"uuid/name {served.get('uuid')}/{served.get('name')}")
    if served.get("meta", {}) != server["metadata"]:
        problems.append(f"meta {served.get('meta')} != {server['metadata']}")
    if server["tenant_id"] == PROJECT:  # the users' key pairs, whose material the soak made
        problems += _key_problems(server, served.get("public_keys", {}), keys)
    user_data = server.get("OS-EXT-SRV-ATTR:user_data")
    if user_data is None:
        if ud_status != 404:
            problems.append(f"user_data {ud_status} for a server without user data")
    elif ud_status != 200 or ud_body != base64.b64decode(user_data):
        problems.append(f"user_data {ud_status} {ud_body[:40]!r} is not the API's")
    return problems


def _key_problems(server: dict[str, Any], got: dict[str, str], keys: dict[str, str]) -> list[str]:
    """The served ``public_keys`` against the API's ``keys``: the same names in the same order,
    each the material the user registered, whose fingerprint is the one the API shows."""
    live = [k for k in server["keys"] if not k["expired"]]
    wanted = {k["name"]: keys.get(k["name"], "?") for k in live}
    if got != wanted or list(got) != [k["name"] for k in live]:
        return [f"public_keys {list(got)} != {list(wanted)}"]
    return [
        f"key {k['name']} is not the API's {k['fingerprint_sha256']}"
        for k in live
        if _fingerprint(got[k["name"]]) != k["fingerprint_sha256"]
    ]


METRIC = re.compile(r"^(\w+)(?:\{(.*)\})?\s+(\S+)$")


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    r = httpx.get(f"{url}/metrics", timeout=30)
    r.raise_for_status()
    found = []
    for line in r.text.splitlines():
        match = METRIC.match(line)
        if match and not line.startswith("#"):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            found.append((match.group(1), labels, float(match.group(3))))
    return found


def check_metrics(api_url: str, metadata_url: str, live: int, findings: Findings) -> None:
    served: Counter[str] = Counter()
    for url in (api_url, metadata_url):
        for name, labels, value in scrape(url):
            if name == "cloudseed_http_requests_total" and labels.get("status", "").startswith("5"):
                served[f"{labels['listener']} {labels['status']}"] += int(value)
    findings.numbers["5xx counted by the servers"] = dict(served)
    for name, _, value in scrape(metadata_url):
        if name == "cloudseed_metadata_waiters" and value:
            findings.fault(f"{value:g} long-polls still waiting after every guest left")
        if name == "cloudseed_metadata_cache_guests":
            findings.numbers["guests cached (both workers)"] = int(value)
            if value > 2 * live:
                findings.fault(f"{value:g} guests cached for {live} live servers (2 workers)")
