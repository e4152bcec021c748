"""Real processes: ``cloudseed serve --no-compute`` and ``cloudseed compute --host`` agents
sharing one database, killed with SIGKILL in the middle of their work.

Each test gets a fresh database of its backend and a data directory of its own; the agents use
the fake driver with a delay (so an operation is still running when it is killed) and a lease
of 3 s (so the next agent resumes it within seconds).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from cloudseed.db.engines import Database
from cloudseed.db.notify import OPERATIONS
from tests.support import databases
from tests.support.cluster import (
    ADMIN,
    Cluster,
    create,
    healthy,
    image_id,
    operation_state,
    operation_states,
    registered,
    running_cluster,
    server,
    status_is,
    wait,
)

LEASE = 3


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    try:
        with running_cluster(
            request.param,
            tmp_path,
            CLOUDSEED_COMPUTE__LEASE_SECONDS=str(LEASE),
            CLOUDSEED_FAKE_DRIVER__DELAY_MS="2500",
        ) as made:
            yield made
    except databases.Unavailable as exc:
        if databases.required():
            raise
        pytest.skip(str(exc))


def test_agents_on_two_hosts_run_their_own_servers(cluster: Cluster):
    cluster.start_agent("alpha")
    cluster.start_agent("beta")
    ids = {}
    for host in ("alpha", "beta"):
        wait(lambda host=host: registered(cluster, host), 30, cluster, f"{host} registered")
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
    """Three builds, so that the successor resumes them together: their records read at once
    and their successes written in one transaction (agent/build_outcomes.py), each once."""
    cluster.start_agent("alpha")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    ids = [create(cluster, "alpha") for _ in range(3)]
    for server_id in ids:
        wait(lambda i=server_id: operation_state(cluster, i) == "running", 30, cluster, "running")
    cluster.kill("agent-alpha")  # in the middle of the fake driver's 2.5 s spawns
    assert [server(cluster, i)["status"] for i in ids] == ["BUILD"] * 3
    restarted = time.monotonic()
    cluster.start_agent("alpha")
    for server_id in ids:
        wait(status_is(cluster, server_id, "ACTIVE"), LEASE + 20, cluster, "resumed ACTIVE")
    # Final within the lease, the restart and one more spawn (2.5 s), with room for a slow CI.
    assert time.monotonic() - restarted < LEASE + 15
    for server_id in ids:
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
        assert operation_states(cluster, server_id) == ["done"]


def test_an_api_node_killed_after_its_202_loses_nothing(cluster: Cluster):
    cluster.start_agent("alpha")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    server_id = create(cluster, "alpha")
    cluster.kill("api")  # right after the 202: the operation was queued with it
    cluster.start_api()
    assert healthy(cluster.api)
    wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "server ACTIVE")


def _request_id(cluster: Cluster, server_id: str) -> str:
    actions = httpx.get(
        f"{cluster.api}/v2.1/servers/{server_id}/os-instance-actions", headers=ADMIN
    ).json()["instanceActions"]
    request_id: str = actions[-1]["request_id"]
    return request_id


def operation_listeners(cluster: Cluster) -> set[int]:
    """The server processes of the connections LISTENing for new operations (db/notify.py)."""
    db = Database.connect("cell", cluster.url)
    try:
        with db.read() as session:
            return set(
                session.scalars(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = :name "
                        "AND datname = current_database() AND query LIKE 'LISTEN%'"
                    ),
                    {"name": f"cloudseed {OPERATIONS}"},
                )
            )
    finally:
        db.dispose()


@pytest.mark.parametrize("cluster", ["postgresql"], indirect=True)
def test_postgresql_wakes_an_idle_agent_at_once(cluster: Cluster):
    """An agent that would poll only once a minute takes a new operation within seconds:
    the API node's NOTIFY, sent when the create commits, wakes it. (SQLite and MariaDB have
    no push; their agents poll, as the other tests here show.)"""
    before = operation_listeners(cluster)
    cluster.start_agent("alpha", CLOUDSEED_COMPUTE__POLL_INTERVAL_MS="60000")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    wait(lambda: operation_listeners(cluster) - before, 30, cluster, "alpha LISTENing")
    # A first server, taken by the look the agent takes on starting (or by one its NOTIFY
    # woke): once it is taken, that look is over, and the next is a minute away unless told.
    first = create(cluster, "alpha")
    wait(lambda: operation_state(cluster, first) != "pending", 30, cluster, "first taken")
    started = time.monotonic()
    server_id = create(cluster, "alpha")
    wait(lambda: operation_state(cluster, server_id) != "pending", 10, cluster, "taken")
    assert time.monotonic() - started < 5


def _action(cluster: Cluster, server_id: str, body: dict[str, Any], version: str = "2.105") -> None:
    r = httpx.post(
        f"{cluster.api}/v2.1/servers/{server_id}/action",
        json=body,
        headers={**ADMIN, "OpenStack-API-Version": f"compute {version}"},
        timeout=10,
    )
    assert r.status_code == 202, r.text


def _interrupt(cluster: Cluster, server_id: str) -> None:
    """Kill the agent while the server's latest operation runs, and start it again."""
    wait(lambda: operation_state(cluster, server_id) == "running", 30, cluster, "running")
    cluster.kill("agent-alpha")
    cluster.start_agent("alpha")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"rebuild": {"imageRef": "IMAGE", "name": "renamed", "user_data": "bmV3"}},
            {"name": "renamed", "OS-EXT-SRV-ATTR:user_data": "bmV3"},
        ),
        (
            {"reboot": {"type": "HARD", "user_data": "bmV3"}},
            {"name": "vm", "OS-EXT-SRV-ATTR:user_data": "bmV3"},
        ),
    ],
    ids=["rebuild", "hard-reboot-with-user-data"],
)
def test_an_agent_killed_mid_operation_leaves_it_applied_once(
    cluster: Cluster, body: dict[str, Any], expected: dict[str, Any]
):
    cluster.start_agent("alpha")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    server_id = create(cluster, "alpha")
    wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "ACTIVE")
    if "rebuild" in body:
        body = {"rebuild": {**body["rebuild"], "imageRef": image_id(cluster)}}
    _action(cluster, server_id, body)
    _interrupt(cluster, server_id)
    wait(status_is(cluster, server_id, "ACTIVE"), LEASE + 20, cluster, "ACTIVE again")
    shown = server(cluster, server_id)
    assert {k: shown[k] for k in expected} == expected
    history = httpx.get(
        f"{cluster.api}/v2.1/servers/{server_id}/bootstrap-history",
        headers={**ADMIN, "OpenStack-API-Version": "compute 2.105"},
    ).json()
    changes = [c for c in history["bootstrap_history"] if c["field"] == "user_data"]
    assert [c["action"] for c in changes] == [next(iter(body))], changes  # applied once


def test_an_agent_killed_mid_delete_still_destroys_the_guest(cluster: Cluster):
    cluster.start_agent("alpha")
    wait(lambda: registered(cluster, "alpha"), 30, cluster, "alpha registered")
    server_id = create(cluster, "alpha")
    wait(status_is(cluster, server_id, "ACTIVE"), 30, cluster, "ACTIVE")
    guest = cluster.tmp / "state" / "fake-driver" / "alpha" / f"{server_id}.json"
    assert guest.exists()
    r = httpx.delete(f"{cluster.api}/v2.1/servers/{server_id}", headers=ADMIN, timeout=10)
    assert r.status_code == 204
    _interrupt(cluster, server_id)
    wait(lambda: not guest.exists(), LEASE + 20, cluster, "the guest destroyed")
    wait(lambda: operation_states(cluster, server_id) == ["done", "done"], 10, cluster, "done")
