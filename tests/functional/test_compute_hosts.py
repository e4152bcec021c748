"""Real processes: ``cloudseed serve --no-compute`` and ``cloudseed compute --host`` agents
sharing one database, killed with SIGKILL in the middle of their work.

Each test gets a fresh database of its backend and a data directory of its own; the agents use
the fake driver with a delay (so an operation is still running when it is killed) and a lease
of 3 s (so the next agent resumes it within seconds).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from cloudseed.hosts.models import ComputeNode
from cloudseed.images import service as images
from cloudseed.servers.models import Operation
from tests.support import databases

LEASE = 3
ADMIN = {"X-Auth-Token": "admin:proj", "OpenStack-API-Version": "compute 2.74"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """One database, one API node, and compute agents started and killed at will."""

    tmp: Path
    url: str
    env: dict[str, str]
    api: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cloudseed", *args]

    def start(self, name: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        with (self.tmp / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                self.command(*args), stdout=log, stderr=log, env={**self.env, **env}
            )
        self.processes[name] = process
        return process

    def start_agent(self, host: str, **env: str) -> subprocess.Popen[bytes]:
        return self.start(f"agent-{host}", "compute", "--host", host, **env)

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()}" for p in sorted(self.tmp.glob("*.log")))

    def close(self) -> None:
        for process in self.processes.values():
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    try:
        scratch = databases.scratch_database(request.param, str(tmp_path))
        url = scratch.__enter__()
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
    env.update(
        CLOUDSEED_STATE_PATH=str(tmp_path / "state"),
        CLOUDSEED_API_DATABASE__CONNECTION=url,
        CLOUDSEED_DATABASE__CONNECTION=url,
        CLOUDSEED_COMPUTE__LEASE_SECONDS=str(LEASE),
        CLOUDSEED_COMPUTE__POLL_INTERVAL_MS="200",
        CLOUDSEED_REPORT_INTERVAL="1",
        CLOUDSEED_FAKE_DRIVER__DELAY_MS="2500",
    )
    made = Cluster(tmp=tmp_path, url=url, env=env, api=f"http://127.0.0.1:{port}")
    subprocess.run(made.command("db", "sync"), env=env, check=True, capture_output=True)
    db = Database.connect("api", url)
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"\0" * 4096)
    with db.write() as session:
        flavors.add_flavor(session, name="m1.tiny", flavorid="1", vcpus=1, ram=512, disk=1)
        images.add_image(session, name="cirros", path=raw, disk_format="raw")
    db.dispose()
    made.start(
        "api",
        "serve",
        "--no-compute",
        "--api-listen",
        f"127.0.0.1:{port}",
        "--metadata-listen",
        "127.0.0.1:0",
    )
    try:
        wait(lambda: _healthy(made.api), 30, made)
        yield made
    finally:
        made.close()
        scratch.__exit__(None, None, None)


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def wait(condition, timeout: float, cluster: Cluster, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s\n{cluster.logs()}")
        time.sleep(0.1)


def server(cluster: Cluster, server_id: str) -> dict:
    r = httpx.get(f"{cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
    assert r.status_code == 200, r.text
    body: dict = r.json()["server"]
    return body


def create(cluster: Cluster, host: str) -> str:
    body = {
        "server": {
            "name": "vm",
            "imageRef": "cirros",
            "flavorRef": "1",
            "networks": "none",
            "host": host,
        }
    }
    r = httpx.post(f"{cluster.api}/v2.1/servers", json=body, headers=ADMIN, timeout=10)
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    return server_id


def status_is(cluster: Cluster, server_id: str, status: str):  # type: ignore[no-untyped-def]
    def check() -> bool:
        s = server(cluster, server_id)
        return s["status"] == status and s["OS-EXT-STS:task_state"] is None

    return check


def test_agents_on_two_hosts_run_their_own_servers(cluster: Cluster):
    cluster.start_agent("alpha")
    cluster.start_agent("beta")
    ids = {}
    for host in ("alpha", "beta"):
        wait(lambda host=host: _registered(cluster, host), 30, cluster, f"{host} registered")
        ids[host] = create(cluster, host)
    for host, server_id in ids.items():
        wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, f"{host}'s server ACTIVE")
        assert server(cluster, server_id)["OS-EXT-SRV-ATTR:host"] == host
    # A clean stop: SIGTERM, exit status 0.
    for name in ("agent-alpha", "agent-beta"):
        process = cluster.processes.pop(name)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, cluster.logs()


def test_an_agent_killed_mid_build_is_resumed_by_its_successor(cluster: Cluster):
    cluster.start_agent("alpha")
    wait(lambda: _registered(cluster, "alpha"), 30, cluster, "alpha registered")
    server_id = create(cluster, "alpha")
    wait(lambda: _operation_state(cluster, server_id) == "running", 30, cluster, "running")
    cluster.kill("agent-alpha")  # in the middle of the fake driver's 2.5 s spawn
    assert server(cluster, server_id)["status"] == "BUILD"
    restarted = time.monotonic()
    cluster.start_agent("alpha")
    wait(status_is(cluster, server_id, "ACTIVE"), LEASE + 20, cluster, "resumed build ACTIVE")
    # Final within the lease, the restart and one more spawn (2.5 s), with room for a slow CI.
    assert time.monotonic() - restarted < LEASE + 15
    actions = httpx.get(
        f"{cluster.api}/v2.1/servers/{server_id}/os-instance-actions/"
        + _request_id(cluster, server_id),
        headers={**ADMIN, "OpenStack-API-Version": "compute 2.84"},
    ).json()["instanceAction"]
    assert [e["event"] for e in actions["events"]] == [
        "compute__do_build_and_run_instance",
        "compute_resume_operation",
    ]
    assert actions["events"][0]["result"] == "Success"


def test_an_api_node_killed_after_its_202_loses_nothing(cluster: Cluster):
    cluster.start_agent("alpha")
    wait(lambda: _registered(cluster, "alpha"), 30, cluster, "alpha registered")
    server_id = create(cluster, "alpha")
    cluster.kill("api")  # right after the 202: the operation was queued with it
    port = cluster.api.rsplit(":", 1)[1]
    cluster.start(
        "api",
        "serve",
        "--no-compute",
        "--api-listen",
        f"127.0.0.1:{port}",
        "--metadata-listen",
        "127.0.0.1:0",
    )
    wait(lambda: _healthy(cluster.api), 30, cluster, "API back")
    wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "server ACTIVE")


def _registered(cluster: Cluster, host: str) -> bool:
    db = Database.connect("cell", cluster.url)
    try:
        with db.read() as session:
            return (
                session.scalar(select(ComputeNode.id).where(ComputeNode.host == host)) is not None
            )
    finally:
        db.dispose()


def _operation_state(cluster: Cluster, server_id: str) -> str | None:
    db = Database.connect("cell", cluster.url)
    try:
        with db.read() as session:
            return session.scalar(
                select(Operation.state).where(Operation.instance_uuid == server_id)
            )
    finally:
        db.dispose()


def _request_id(cluster: Cluster, server_id: str) -> str:
    actions = httpx.get(
        f"{cluster.api}/v2.1/servers/{server_id}/os-instance-actions", headers=ADMIN
    ).json()["instanceActions"]
    request_id: str = actions[-1]["request_id"]
    return request_id


@pytest.mark.parametrize("cluster", ["postgresql"], indirect=True)
def test_postgresql_wakes_an_idle_agent_at_once(cluster: Cluster):
    """An agent that would poll only once a minute takes a new operation within seconds:
    the API node's NOTIFY, sent when the create commits, wakes it. (SQLite and MariaDB have
    no push; their agents poll, as the other tests here show.)"""
    cluster.start_agent("alpha", CLOUDSEED_COMPUTE__POLL_INTERVAL_MS="60000")
    wait(lambda: _registered(cluster, "alpha"), 30, cluster, "alpha registered")
    time.sleep(1)  # its first poll is over; the next would be a minute away
    started = time.monotonic()
    server_id = create(cluster, "alpha")
    wait(lambda: _operation_state(cluster, server_id) != "pending", 10, cluster, "taken")
    assert time.monotonic() - started < 5
