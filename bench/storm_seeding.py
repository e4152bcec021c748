"""The storm's guests: a fresh database with what servers are created from (``cloudseed``
administrative commands), then servers created through the compute API (multi-create, each
with a key pair, cloud-config user data and metadata) until all are ACTIVE; ``seeded_state``
keeps a seeded state directory for reuse (``--state``)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import storm_identity
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from storm_host import step, venv_tool
from storm_server import Server, errors_in_log, running_server

# A realistic first-boot cloud-config, about 300 bytes.
USER_DATA = b"""#cloud-config
hostname: web
package_update: true
packages: [nginx, jq, chrony]
users:
  - name: deploy
    groups: [sudo]
    shell: /bin/bash
    sudo: "ALL=(ALL) NOPASSWD:ALL"
write_files:
  - path: /etc/motd
    content: "Provisioned by cloudseed\\n"
runcmd:
  - [systemctl, enable, --now, nginx]
  - [sh, -c, "echo booted > /var/tmp/ready"]
"""
SERVER_METADATA = {"role": "web", "env": "bench", "owner": "storm"}
# Servers created beyond --instances, crawled before the memory baseline is taken: that pass
# sets up what serving 256 connections costs whatever the number of guests (buffers, pools,
# caches of compiled SQL), so the growth measured after it is the guests' alone.
PRIMING_INSTANCES = 200


def cloudseed(data_dir: Path, *args: str) -> str:
    """Run one ``cloudseed`` administrative command; return its output."""
    command = [
        venv_tool("cloudseed", "run with the project's venv python"),
        "--data-dir",
        str(data_dir),
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Registries:
    image: str
    flavor: str
    network: str


ID = ("-f", "value", "-c", "id")  # what `cloudseed ... add` prints: the new id alone


def register(data_dir: Path) -> Registries:
    """A fresh database, and what servers are created from: a /16, so that 10,000 instances
    get distinct addresses."""
    cloudseed(data_dir, "db", "sync")
    disk = data_dir / "disk.raw"
    disk.write_bytes(b"\0" * 1024 * 1024)
    image = cloudseed(
        data_dir, "image", "add", "storm-image", "--file", str(disk), "--disk-format", "raw", *ID
    )
    flavor = cloudseed(
        data_dir, "flavor", "add", "storm.small", "--vcpus", "1", "--ram", "512", "--disk", "1", *ID
    )
    network = cloudseed(
        data_dir,
        "network",
        "add",
        "storm-net",
        "--cidr",
        "10.64.0.0/16",
        "--gateway",
        "10.64.0.1",
        "--dns",
        "10.64.0.2",
        *ID,
    )
    return Registries(image=image, flavor=flavor, network=network)


def import_key_pair(api: httpx.Client) -> str:
    public = (
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    response = api.post(
        "/v2.1/os-keypairs",
        headers={"OpenStack-API-Version": "compute 2.10"},
        json={"keypair": {"name": "storm-key", "public_key": f"{public} deploy@storm"}},
    )
    response.raise_for_status()
    return "storm-key"


CREATE_ATTEMPTS = 5


async def create_batches(
    base: str, registries: Registries, key_name: str, total: int, batch: int, concurrency: int
) -> tuple[list[float], list[str]]:
    """POST multi-creates of ``batch`` servers from ``concurrency`` clients; return each
    batch's seconds, and the refusals that a retry of the same batch got past.

    A refused multi-create creates nothing, so the batch is simply posted again. (Seen: 500
    from a MAC address drawn twice; 24 random bits make that likely among 10,000 ports.)
    """
    refusals: list[str] = []
    batch_seconds: list[float] = []
    sizes = iter([min(batch, total - start) for start in range(0, total, batch)])
    body_template = {
        "name": "storm",
        "imageRef": registries.image,
        "flavorRef": registries.flavor,
        "networks": [{"uuid": registries.network}],
        "key_name": key_name,
        "user_data": base64.b64encode(USER_DATA).decode(),
        "metadata": SERVER_METADATA,
        "return_reservation_id": True,
    }

    async def client_loop(client: httpx.AsyncClient) -> None:
        for size in sizes:  # one shared iterator: each batch is created once
            body = {"server": {**body_template, "min_count": size, "max_count": size}}
            for _attempt in range(CREATE_ATTEMPTS):
                posted = time.perf_counter()
                response = await client.post("/v2.1/servers", json=body)
                if response.status_code == 202:
                    batch_seconds.append(time.perf_counter() - posted)
                    if len(batch_seconds) % 10 == 0:
                        print(
                            f"  {len(batch_seconds)} batches, the last in "
                            f"{batch_seconds[-1]:.1f} s",
                            flush=True,
                        )
                    break
                refusals.append(f"{response.status_code} {response.text[:200]}")
                print(f"  create refused, posting the batch again: {refusals[-1]}", flush=True)
            else:
                raise RuntimeError(f"create: {response.status_code} {response.text[:500]}")

    headers = {**storm_identity.AUTH, "OpenStack-API-Version": "compute 2.37"}
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=base, headers=headers, timeout=600)
            )
            for _ in range(concurrency)
        ]
        await asyncio.gather(*(client_loop(c) for c in clients))
    return batch_seconds, refusals


def count_servers(api: httpx.Client, status: str) -> int:
    """How many servers have ``status`` (stops counting at one page)."""
    response = api.get("/v2.1/servers", params={"status": status, "limit": 1000})
    response.raise_for_status()
    return len(response.json()["servers"])


def wait_until_active(api: httpx.Client, total: int) -> None:
    deadline = time.monotonic() + 600
    while count_servers(api, "BUILD"):
        if time.monotonic() > deadline:
            raise RuntimeError("servers still building after 600 s")
        time.sleep(0.5)
    errors = count_servers(api, "ERROR")
    if errors:
        raise RuntimeError(f"{errors} servers went to ERROR")
    active = len(all_server_ids(api))
    if active != total:
        raise RuntimeError(f"{active} servers exist, expected {total}")


def all_server_ids(api: httpx.Client) -> list[str]:
    """Every server id, following ``servers_links``."""
    ids: list[str] = []
    params: dict[str, str] = {"limit": "1000"}
    while True:
        response = api.get("/v2.1/servers", params=params)
        response.raise_for_status()
        body = response.json()
        ids += [s["id"] for s in body["servers"]]
        if not body.get("servers_links") or not body["servers"]:
            return ids
        params = {"limit": "1000", "marker": ids[-1]}


@dataclass
class Seeding:
    instances: list[str]
    create_seconds: float
    active_seconds: float  # from the first POST until every server is ACTIVE
    batch_seconds: list[float]  # each multi-create's answer time, in order
    refusals: list[str]  # multi-creates refused, then retried
    causes: list[str] = field(default_factory=list)  # the server log's reasons for them


def seed(
    server: Server, registries: Registries, total: int, batch: int, concurrency: int
) -> Seeding:
    with httpx.Client(base_url=server.api, headers=storm_identity.AUTH, timeout=120) as api:
        key_name = import_key_pair(api)
        started = time.perf_counter()
        batch_seconds, refusals = asyncio.run(
            create_batches(server.api, registries, key_name, total, batch, concurrency)
        )
        created = time.perf_counter() - started
        wait_until_active(api, total)
        active = time.perf_counter() - started
        return Seeding(sorted(all_server_ids(api)), created, active, batch_seconds, refusals)


SEED_RECORD = "storm-seed.json"


def seeded_state(args: argparse.Namespace, tmp: Path) -> tuple[Path, Seeding]:
    """A state directory holding ``--instances`` ACTIVE servers: ``--state`` when it already
    has them (recorded in SEED_RECORD), otherwise seeded now (there, or in ``tmp``)."""
    data_dir = args.state if args.state is not None else tmp / "state"
    record = data_dir / SEED_RECORD
    if record.exists():
        saved = Seeding(**json.loads(record.read_text()))
        if len(saved.instances) != args.instances + PRIMING_INSTANCES:
            sys.exit(
                f"{data_dir} holds {len(saved.instances)} instances, not "
                f"{args.instances} + {PRIMING_INSTANCES}: use another --state directory"
            )
        print(f"reusing {len(saved.instances):,} servers seeded earlier in {data_dir}")
        return data_dir, saved
    data_dir.mkdir(parents=True, exist_ok=True)
    if any(data_dir.iterdir()):
        sys.exit(f"{data_dir} is not empty and was not seeded by this benchmark")
    done = step("fresh SQLite databases; flavor, image, /16 network")
    registries = register(data_dir)
    done()
    with running_server(data_dir, args.workers) as server:
        total = args.instances + PRIMING_INSTANCES
        done = step(f"creating {total:,} servers through the compute API")
        seeding = seed(server, registries, total, args.batch, args.create_concurrency)
        seeding.causes = errors_in_log(server)
        done()
    record.write_text(json.dumps(dataclasses.asdict(seeding)))
    return data_dir, seeding
