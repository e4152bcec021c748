"""Real processes: a compute host whose agents stop cleanly (SIGTERM) is down at once, so no
new server is scheduled to it; one killed (SIGKILL) stays up until ``service_down_time`` has
passed without a heartbeat, as in Nova; the workers of one ``serve`` keep their host up while
any of them runs.

``service_down_time`` is 60 s here, far longer than any wait of these tests: a host seen down
was marked down, not timed out.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import databases
from tests.support.cluster import (
    ADMIN,
    Cluster,
    healthy,
    registered,
    running_cluster,
    server,
    wait,
)
from tests.support.ports import free_port

DOWN_TIME = 60
MARKED_DOWN = "marked down: its last agent stopped"


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    try:
        with running_cluster(
            request.param, tmp_path, CLOUDSEED_SERVICE_DOWN_TIME=str(DOWN_TIME)
        ) as made:
            yield made
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))


def state(cluster: Cluster, host: str) -> str | None:
    """The host's compute service state in ``os-services`` (None: not listed)."""
    r = httpx.get(
        f"{cluster.api}/v2.1/os-services", params={"host": host}, headers=ADMIN, timeout=10
    )
    assert r.status_code == 200, r.text
    states = [s["state"] for s in r.json()["services"] if s["binary"] == "nova-compute"]
    return states[0] if states else None


def terminate(cluster: Cluster, name: str) -> None:
    process = cluster.processes.pop(name)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, cluster.logs()


def create_anywhere(cluster: Cluster) -> str:
    body = {"server": {"name": "vm", "imageRef": "cirros", "flavorRef": "1", "networks": "none"}}
    r = httpx.post(f"{cluster.api}/v2.1/servers", json=body, headers=ADMIN, timeout=10)
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    return server_id


def settled(cluster: Cluster, server_id: str) -> dict[str, object] | None:
    shown = server(cluster, server_id)
    return shown if shown["status"] in ("ACTIVE", "ERROR") else None


def up(cluster: Cluster, host: str) -> None:
    wait(lambda: state(cluster, host) == "up", 30, cluster, f"{host} up")


def test_a_clean_stop_marks_the_host_down_at_once_and_a_start_up_again(cluster: Cluster):
    for host in ("alpha", "beta"):
        cluster.start_agent(host)
    for host in ("alpha", "beta"):
        wait(lambda host=host: registered(cluster, host), 30, cluster, f"{host} registered")
        up(cluster, host)

    terminate(cluster, "agent-alpha")
    assert state(cluster, "alpha") == "down"  # at once: the agent marked it before exiting
    assert state(cluster, "beta") == "up"
    # Every new server goes to beta, the only host up, though an idle alpha has more room.
    for _ in range(2):
        placed = create_anywhere(cluster)
        shown = wait(lambda placed=placed: settled(cluster, placed), 30, cluster, "settled")
        assert shown["status"] == "ACTIVE", shown
        assert shown["OS-EXT-SRV-ATTR:host"] == "beta"

    cluster.start_agent("alpha")
    up(cluster, "alpha")  # its registration marks it up again
    server_id = create_anywhere(cluster)  # the emptier host now: alpha
    shown = wait(lambda: settled(cluster, server_id), 30, cluster, "placed on alpha")
    assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "alpha"), shown


def test_with_its_only_host_stopped_a_create_finds_no_valid_host(cluster: Cluster):
    cluster.start_agent("alpha")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    up(cluster, "alpha")
    terminate(cluster, "agent-alpha")
    assert state(cluster, "alpha") == "down"
    server_id = create_anywhere(cluster)
    shown = wait(lambda: settled(cluster, server_id), 30, cluster, "settled")
    assert shown["status"] == "ERROR"
    fault = shown["fault"]
    assert isinstance(fault, dict) and fault["message"].startswith("No valid host was found.")


def test_a_crash_keeps_the_heartbeat_rule(cluster: Cluster):
    cluster.start_agent("alpha")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    up(cluster, "alpha")
    cluster.kill("agent-alpha")
    # Nothing marked it down: it stays up until service_down_time passes without a heartbeat.
    assert state(cluster, "alpha") == "up"
    assert MARKED_DOWN not in cluster.logs()


def _workers(pid: int) -> set[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return {int(child) for child in children}


def test_the_workers_of_a_serve_keep_their_host_up_until_the_last_stops(cluster: Cluster):
    api = f"127.0.0.1:{free_port()}"
    serve = cluster.start(
        "serve-gamma",
        "serve",
        "--api-listen",
        api,
        "--metadata-listen",
        f"127.0.0.1:{free_port()}",
        CLOUDSEED_HOST="gamma",
        CLOUDSEED_WORKERS="2",
    )
    wait(lambda: healthy(f"http://{api}"), 60, cluster, "the serve answering")
    started = "compute agent gamma/"
    wait(lambda: cluster.logs().count(started) == 2, 60, cluster, "both workers' agents started")
    up(cluster, "gamma")

    first, second = sorted(_workers(serve.pid))
    log = cluster.tmp / "serve-gamma.log"
    before = log.read_text().count(started)
    os.kill(first, signal.SIGTERM)  # one worker restarted on its own: the host stays up
    wait(lambda: first not in _workers(serve.pid), 60, cluster, "the worker gone")
    wait(lambda: log.read_text().count(started) == before + 1, 60, cluster, "its successor")
    assert MARKED_DOWN not in log.read_text()
    assert state(cluster, "gamma") == "up"
    assert second in _workers(serve.pid)

    terminate(cluster, "serve-gamma")  # the whole serve: its last worker marks the host down
    assert state(cluster, "gamma") == "down"
    assert log.read_text().count(MARKED_DOWN) == 1
