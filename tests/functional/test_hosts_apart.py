"""Compute hosts that share nothing with the API node but the database and the API's URL, with
real processes: ``cloudseed serve --no-compute`` and a ``cloudseed compute --host`` agent with
a state directory of its own (fake driver). The agent fetches the image it boots over HTTP into
its own image cache, and the API-only node answers ``os-getConsoleOutput`` for the agent's
guest from the tail the agent stored in the cell database, also while the agent is down.

As root, an agent also runs in a mount namespace of its own where a private tmpfs hides the
API node's data directory, which holds the image it boots: it can only have fetched it. (The
qemu driver's agent so, booting a real guest, is tests/e2e/test_two_guests.py.)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from cloudseed.compute.fake import FAKE_CONSOLE
from cloudseed.db.engines import Database
from cloudseed.images import service as images
from cloudseed.servers.models import ConsoleTail
from tests.support import databases
from tests.support.cluster import (
    ADMIN,
    Cluster,
    create,
    registered,
    running_cluster,
    status_is,
    wait,
)


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    try:
        with running_cluster(
            request.param, tmp_path, CLOUDSEED_COMPUTE__CONSOLE_TAIL_INTERVAL="1"
        ) as made:
            yield made
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))


def console(cluster: Cluster, server_id: str, length: int | None = None) -> httpx.Response:
    return httpx.post(
        f"{cluster.api}/v2.1/servers/{server_id}/action",
        json={"os-getConsoleOutput": {} if length is None else {"length": length}},
        headers=ADMIN,
        timeout=10,
    )


def stored_tails(cluster: Cluster) -> int:
    db = Database.connect("cell", cluster.url)
    try:
        with db.read() as session:
            return int(session.scalar(select(func.count()).select_from(ConsoleTail)) or 0)
    finally:
        db.dispose()


def test_a_host_of_its_own_boots_from_the_api_and_shows_its_console(cluster: Cluster) -> None:
    state = cluster.tmp / "host-beta"
    # The image cache's manager every second, removing what no guest uses at once.
    agent_env = {
        "CLOUDSEED_STATE_PATH": str(state),
        "CLOUDSEED_IMAGE_CACHE__MANAGER_INTERVAL": "1",
        "CLOUDSEED_IMAGE_CACHE__REMOVE_UNUSED_ORIGINAL_MINIMUM_AGE_SECONDS": "0",
    }
    cluster.start_agent("beta", **agent_env)
    wait(lambda: registered(cluster, "beta"), 30, cluster, "beta registered")
    server_id = create(cluster, "beta")
    wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "the server ACTIVE")

    # The image came over HTTP into the agent's own cache, named by its SHA-256.
    image = (cluster.tmp / "disk.raw").read_bytes()
    cached = state / "_base" / hashlib.sha256(image).hexdigest()
    assert cached.read_bytes() == image
    api_log = (cluster.tmp / "api.log").read_text()
    assert " GET /image/v2/images/" in api_log and "/file 200 " in api_log, api_log
    assert not (cluster.tmp / "state" / "_base").exists()  # the API node keeps no cache
    # The manager's passes keep it while the guest uses it (each marks it used again).
    used_at = cached.stat().st_mtime
    wait(lambda: cached.stat().st_mtime > used_at, 30, cluster, "a pass keeping the image")

    # The console, from the API-only node: what the agent stored within its interval.
    answered = wait(
        lambda: r if (r := console(cluster, server_id)).status_code == 200 else None,
        30,
        cluster,
        "the console readable on the API node",
    )
    assert answered.json() == {"output": FAKE_CONSOLE}
    assert console(cluster, server_id, 2).json() == {"output": "ONE MORE\nLAST LINE"}

    # Still there while the agent is down: it is the database's.
    cluster.kill("agent-beta")
    assert console(cluster, server_id).json() == {"output": FAKE_CONSOLE}

    # Deleted with its guest: the destroy (by the agent, started again) removes it, and the
    # image, now unused, leaves the host's cache.
    cluster.start_agent("beta", **agent_env)
    r = httpx.delete(f"{cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
    assert r.status_code == 204, r.text
    wait(lambda: stored_tails(cluster) == 0, 30, cluster, "the console tail removed")
    wait(lambda: not cached.exists(), 30, cluster, "the unused image evicted")
    process = cluster.processes.pop("agent-beta")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, cluster.logs()


def test_without_a_stored_tail_an_api_only_node_has_no_console(tmp_path: Path) -> None:
    try:
        with running_cluster(
            "sqlite", tmp_path, CLOUDSEED_COMPUTE__CONSOLE_TAIL_INTERVAL="0"
        ) as cluster:
            cluster.start_agent("beta", CLOUDSEED_STATE_PATH=str(tmp_path / "host-beta"))
            wait(lambda: registered(cluster, "beta"), 30, cluster, "beta registered")
            server_id = create(cluster, "beta")
            wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "the server ACTIVE")
            r = console(cluster, server_id)
            assert r.status_code == 404, r.text
            assert r.json()["itemNotFound"]["message"] == "Guest does not have a console available."
            assert stored_tails(cluster) == 0
    except databases.Unavailable as exc:  # pragma: no cover - SQLite is always there
        pytest.skip(str(exc))


# Mounts a private tmpfs over its first argument, then runs the rest (which replaces it).
HIDING = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--",
    "sh",
    "-ec",
    'mount -t tmpfs -o size=1m,mode=0 api-node-data-hidden "$1"; shift; exec "$@"',
    "sh",
]


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a mount namespace of its own needs root and unshare (util-linux)",
)
def test_an_agent_that_cannot_see_the_api_nodes_data_directory(cluster: Cluster) -> None:
    hidden = cluster.tmp / "state"  # the API node's state_path
    data = hashlib.sha512(b"only on the API node").digest() * 128
    (hidden / "images").mkdir(parents=True, exist_ok=True)
    (hidden / "images" / "only-here.raw").write_bytes(data)
    db = Database.connect("api", cluster.url)
    try:
        db.run(
            lambda s: images.add_image(
                s, name="hidden", path=hidden / "images" / "only-here.raw", disk_format="raw"
            ),
            write=True,
        )
    finally:
        db.dispose()
    state = cluster.tmp / "host-isolated"
    agent = cluster.start_agent(
        "isolated", wrapper=[*HIDING, str(hidden)], CLOUDSEED_STATE_PATH=str(state)
    )
    wait(lambda: registered(cluster, "isolated"), 30, cluster, "isolated registered")
    mounts = (Path("/proc") / str(agent.pid) / "mountinfo").read_text().splitlines()
    assert any(f" {hidden} " in m and " - tmpfs " in m for m in mounts), mounts

    body = {"name": "vm", "imageRef": "hidden", "flavorRef": "1", "networks": "none"}
    r = httpx.post(
        f"{cluster.api}/v2.1/servers",
        json={"server": {**body, "host": "isolated"}},
        headers=ADMIN,
        timeout=10,
    )
    assert r.status_code == 202, r.text
    server_id = r.json()["server"]["id"]
    wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "the server ACTIVE")
    assert (state / "_base" / hashlib.sha256(data).hexdigest()).read_bytes() == data
    answered = wait(
        lambda: r if (r := console(cluster, server_id)).status_code == 200 else None,
        30,
        cluster,
        "the console readable on the API node",
    )
    assert answered.json() == {"output": FAKE_CONSOLE}
