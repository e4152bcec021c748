"""A cloudseed of real processes on one machine: a fresh database, an API node (``cloudseed
serve --no-compute``) and compute agents (``cloudseed compute --host``) started and killed at
will. Used by the crash tests and by bench/operations.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from cloudseed.hosts.models import ComputeNode
from cloudseed.images import service as images
from cloudseed.servers.models import Operation
from tests.support import databases
from tests.support.ports import free_port
from tests.support.waiting import wait_until

T = TypeVar("T")

# An admin at 2.74, who may pick a server's compute host.
ADMIN = {"X-Auth-Token": "admin:proj", "OpenStack-API-Version": "compute 2.74"}


@dataclass
class Cluster:
    tmp: Path
    url: str
    env: dict[str, str]
    api: str = ""
    # The API node's metadata listener: a free port of its own when 0 (nothing reaches it).
    metadata_port: int = 0
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cloudseed", *args]

    def start(
        self, name: str, *args: str, wrapper: Sequence[str] = (), **env: str
    ) -> subprocess.Popen[bytes]:
        """Run ``cloudseed ARGS`` (under ``wrapper``'s command, which execs it: its pid is the
        process's) with the cluster's settings and ``env``."""
        with (self.tmp / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                [*wrapper, *self.command(*args)], stdout=log, stderr=log, env={**self.env, **env}
            )
        self.processes[name] = process
        return process

    def start_api(self) -> None:
        port = self.api.rsplit(":", 1)[1]
        self.start(
            "api",
            "serve",
            "--no-compute",
            "--api-listen",
            f"127.0.0.1:{port}",
            "--metadata-listen",
            f"127.0.0.1:{self.metadata_port}",
        )
        wait(lambda: healthy(self.api), 60, self, "the API node answering")

    def start_agent(
        self, host: str, *, wrapper: Sequence[str] = (), **env: str
    ) -> subprocess.Popen[bytes]:
        return self.start(f"agent-{host}", "compute", "--host", host, wrapper=wrapper, **env)

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
        self.processes.clear()


@contextmanager
def running_cluster(
    backend: str, tmp: Path, *, metadata_port: int = 0, **env: str
) -> Iterator[Cluster]:
    """A fresh database of ``backend`` with a flavor (m1.tiny) and an image (cirros), and an
    API node on a free port (its metadata service on ``metadata_port``); ``env`` adds
    settings (``CLOUDSEED_...``) for every process. Agents fetch the images they boot from the
    API node over HTTP (``[glance] api_servers``), whatever their driver. Raises
    databases.Unavailable when the backend is not there."""
    with databases.scratch_database(backend, str(tmp)) as url:
        api = f"http://127.0.0.1:{free_port()}"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("CLOUDSEED_")}
        environ.update(
            {
                "CLOUDSEED_STATE_PATH": str(tmp / "state"),
                "CLOUDSEED_API_DATABASE__CONNECTION": url,
                "CLOUDSEED_DATABASE__CONNECTION": url,
                "CLOUDSEED_COMPUTE__POLL_INTERVAL_MS": "200",
                "CLOUDSEED_REPORT_INTERVAL": "1",
                "CLOUDSEED_GLANCE__API_SERVERS": f"{api}/image",
                **env,
            }
        )
        cluster = Cluster(tmp=tmp, url=url, env=environ, api=api, metadata_port=metadata_port)
        subprocess.run(cluster.command("db", "sync"), env=environ, check=True, capture_output=True)
        db = Database.connect("api", url)
        raw = tmp / "disk.raw"
        raw.write_bytes(b"\0" * 4096)
        try:

            def work(session: Session) -> None:
                flavors.add_flavor(session, name="m1.tiny", flavorid="1", vcpus=1, ram=512, disk=1)
                images.add_image(session, name="cirros", path=raw, disk_format="raw")

            db.run(work, write=True)
        finally:
            db.dispose()
        try:
            cluster.start_api()
            yield cluster
        finally:
            cluster.close()


def healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def wait(condition: Callable[..., T | None], timeout: float, cluster: Cluster, what: str) -> T:
    """``wait_until`` that adds the cluster's logs to the failure."""
    try:
        return wait_until(condition, timeout=timeout, interval=0.1, max_interval=0.1, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.logs()}") from None


def _cell(cluster: Cluster) -> Database:
    return Database.connect("cell", cluster.url)


def registered(cluster: Cluster, host: str) -> bool:
    db = _cell(cluster)
    try:
        with db.read() as session:
            return (
                session.scalar(select(ComputeNode.id).where(ComputeNode.host == host)) is not None
            )
    finally:
        db.dispose()


def operation_state(cluster: Cluster, server_id: str) -> str | None:
    """The state of the server's latest operation (None: it has none)."""
    states = operation_states(cluster, server_id)
    return states[-1] if states else None


def operation_states(cluster: Cluster, server_id: str) -> list[str]:
    """The states of the server's operations, oldest first."""
    db = _cell(cluster)
    try:
        with db.read() as session:
            return list(
                session.scalars(
                    select(Operation.state)
                    .where(Operation.instance_uuid == server_id)
                    .order_by(Operation.id)
                )
            )
    finally:
        db.dispose()


def server(cluster: Cluster, server_id: str) -> dict[str, Any]:
    r = httpx.get(f"{cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()["server"]
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


def status_is(cluster: Cluster, server_id: str, status: str) -> Callable[[], bool]:
    def check() -> bool:
        s = server(cluster, server_id)
        return s["status"] == status and s["OS-EXT-STS:task_state"] is None

    return check


def image_id(cluster: Cluster) -> str:
    """The id of the cluster's one image (requests such as rebuild take ids, not names)."""
    r = httpx.get(f"{cluster.api}/image/v2/images", headers=ADMIN, timeout=10)
    found: str = r.json()["images"][0]["id"]
    return found
