"""Durable operations, on each database: queued with the request's claim, run by the agent of
the instance's host under a lease, resumed when that agent dies, bounded, cancelled by an
admin's reset; and scheduling onto live hosts with room.

The servers here are placed on hosts of their own (an admin's ``host`` at 2.74), whose agents
are Agent objects the tests drive step by step (``run_once``), so nothing runs unless a test
says so. The session-wide test server's own agent serves another host and never touches them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from cloudseed.agent.build_outcomes import BUILD_EVENT, Built
from cloudseed.agent.worker import MAX_ATTEMPTS, Agent
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.fake import FAKE_SSH_FORWARD, FakeDriver
from cloudseed.db.engines import Database
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.servers import records
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.models import (
    GuestChange,
    Instance,
    InstanceAction,
    InstanceActionEvent,
    InstanceSystemMetadata,
    Operation,
)
from cloudseed.servers.system_metadata import SSH_FORWARD
from cloudseed.settings import Settings
from tests.support.cloud import b64, mv

ADMIN = {"X-Auth-Token": "admin:proj"}
V274 = "2.74"


@pytest.fixture()
def agents(migrated_settings: Settings, api_db: Database) -> Iterator[Callable[..., Agent]]:
    """Make a registered (not started) agent for a host: ``agents("h1")``."""
    made: list[CellDatabases] = []
    agents_made: list[Agent] = []

    def make(
        host: str, *, lease: int = 2, driver: FakeDriver | None = None, resume: bool = True
    ) -> Agent:
        settings = dataclasses.replace(
            migrated_settings,
            compute=dataclasses.replace(migrated_settings.compute, lease_seconds=lease),
            default=dataclasses.replace(
                migrated_settings.default, resume_guests_state_on_host_boot=resume
            ),
        )
        cells = CellDatabases(api_db)
        made.append(cells)
        agent = Agent(settings, host=host, cells=cells, driver=driver or FakeDriver())
        agent.register()
        agents_made.append(agent)
        return agent

    yield make
    for cells in made:
        cells.dispose()
    hosts = [a.host for a in agents_made]

    def forget_hosts(session: Session) -> None:
        session.execute(delete(ComputeNode).where(ComputeNode.host.in_(hosts)))
        session.execute(delete(Service).where(Service.host.in_(hosts)))

    api_db.run(forget_hosts, write=True)  # one database holds both here; no host outlives a test


def create_on(api: httpx.Client, cloud, host: str, **fields) -> str:
    body = {
        "name": "vm",
        "imageRef": cloud.image_id,
        "flavorRef": "1",
        "networks": "none",
        "host": host,
        **fields,
    }
    r = api.post("/v2.1/servers", json={"server": body}, headers={**ADMIN, **mv(V274)})
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    return server_id


def show(api: httpx.Client, server_id: str) -> dict[str, Any]:
    r = api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv("2.105")})
    assert r.status_code == 200, r.text
    server: dict[str, Any] = r.json()["server"]
    return server


def operations_of(cell_db: Database, server_id: str) -> list[Operation]:
    with cell_db.read() as session:
        return list(
            session.scalars(
                select(Operation).where(Operation.instance_uuid == server_id).order_by(Operation.id)
            )
        )


def open_events_of(cell_db: Database, server_id: str) -> list[InstanceActionEvent]:
    """The instance's action events that nothing has finished."""
    with cell_db.read() as session:
        return list(
            session.scalars(
                select(InstanceActionEvent)
                .join(InstanceAction, InstanceAction.id == InstanceActionEvent.action_id)
                .where(
                    InstanceAction.instance_uuid == server_id,
                    InstanceActionEvent.finish_time.is_(None),
                )
            )
        )


def expire_leases(cell_db: Database, server_id: str) -> None:
    """What the passing of lease_seconds does, without waiting for it."""

    def work(session: Session) -> None:
        session.execute(
            update(Operation)
            .where(Operation.instance_uuid == server_id, Operation.state == queue.RUNNING)
            .values(lease_expires_at=dt.datetime(2000, 1, 1))
        )

    cell_db.run(work, write=True)


def events(api: httpx.Client, server_id: str) -> list[dict[str, Any]]:
    actions = api.get(f"/v2.1/servers/{server_id}/os-instance-actions", headers=ADMIN).json()
    found = []
    for action in actions["instanceActions"]:
        r = api.get(
            f"/v2.1/servers/{server_id}/os-instance-actions/{action['request_id']}",
            headers={**ADMIN, **mv("2.84")},
        )
        found += r.json()["instanceAction"]["events"]
    return found


def test_a_request_queues_its_operation_in_the_claim_and_the_agent_runs_it(
    api, cloud, cell_db, agents
):
    agent = agents("h1")
    server_id = create_on(api, cloud, "h1", adminPass="s3cret-pass")
    [op] = operations_of(cell_db, server_id)
    assert (op.kind, op.host, op.state, op.attempts) == ("build", "h1", "pending", 0)
    assert "s3cret-pass" in (op.payload or "")  # carried to the build...
    server = show(api, server_id)
    assert (server["status"], server["OS-EXT-SRV-ATTR:host"]) == ("BUILD", "h1")
    assert agent.run_once() == 1
    assert show(api, server_id)["status"] == "ACTIVE"
    [op] = operations_of(cell_db, server_id)
    assert (op.state, op.lease_owner, op.attempts) == ("done", agent.owner, 1)
    assert "s3cret-pass" not in (op.payload or "")  # ...and dropped when it ended
    assert agent.run_once() == 0


def test_an_operation_whose_agent_died_is_resumed_by_the_next_agent(api, cloud, cell_db, agents):
    first = agents("h1")
    server_id = create_on(api, cloud, "h1")
    [claimed] = cell_db.run(  # the first agent takes it, then dies
        lambda session: queue.claim(
            session, host="h1", owner=first.owner, lease_seconds=60, limit=10
        ),
        write=True,
    )
    second = agents("h1")
    assert second.run_once() == 0  # the lease still holds
    expire_leases(cell_db, server_id)
    assert second.run_once() == 1
    assert show(api, server_id)["status"] == "ACTIVE"
    [op] = operations_of(cell_db, server_id)
    assert (op.state, op.lease_owner, op.attempts) == ("done", second.owner, 2)
    [resumed] = [e for e in events(api, server_id) if e["event"] == "compute_resume_operation"]
    assert f"agent {first.owner} lost its lease" in resumed["details"]
    assert f"resumed by {second.owner} (attempt 2)" in resumed["details"]
    # The first agent, back from the dead, can record nothing: its lease is gone.
    first.steps.run(claimed, cell_db)
    [op] = operations_of(cell_db, server_id)
    assert (op.state, op.lease_owner) == ("done", second.owner)


def test_a_claim_of_another_host_never_hides_an_agents_work(api, cloud, cell_db, agents):
    """Agents of two hosts claim at the same moment. At MariaDB's REPEATABLE READ, a claim that
    walked the primary key (MariaDB's plan for a table this small, with fresh statistics) held
    every row it passed, and the other host's claim skipped its own pending build as locked."""
    if cell_db.engine.dialect.name == "sqlite":
        return  # one writer at a time: the second claim waits for the first, skips nothing
    agents("h1")
    second = agents("h2")
    server_id = create_on(api, cloud, "h2")
    with cell_db.engine.begin() as connection:
        connection.exec_driver_sql("ANALYZE TABLE operations" if _mariadb(cell_db) else "ANALYZE")
    claiming, release = threading.Event(), threading.Event()

    def hold_a_claim(session: Session) -> None:  # h1's agent, in the middle of its claim
        queue.claim(session, host="h1", owner="h1-agent", lease_seconds=60, limit=8)
        claiming.set()
        assert release.wait(30)

    holder = threading.Thread(
        target=cell_db.run,
        args=(hold_a_claim,),
        kwargs={"write": True, "isolation": queue.CLAIM_ISOLATION},
    )
    holder.start()
    try:
        assert claiming.wait(30)
        assert second.run_once() == 1
    finally:
        release.set()
        holder.join()
    assert show(api, server_id)["status"] == "ACTIVE"


def _mariadb(db: Database) -> bool:
    return db.engine.dialect.name in ("mysql", "mariadb")


def test_an_operation_interrupted_too_often_ends_in_error(api, cloud, cell_db, agents):
    agent = agents("h1")
    server_id = create_on(api, cloud, "h1")
    for attempt in range(MAX_ATTEMPTS):

        def work2(session: Session, attempt: int = attempt) -> None:
            taken = queue.claim(
                session, host="h1", owner=f"dead-{attempt}", lease_seconds=60, limit=9
            )
            assert len(taken) == 1

        cell_db.run(work2, write=True)
        expire_leases(cell_db, server_id)
    assert agent.run_once() == 0  # nothing left to run: it gave up
    server = show(api, server_id)
    assert server["status"] == "ERROR"
    assert server["fault"]["message"] == (
        f"The build operation was interrupted {MAX_ATTEMPTS} times "
        "(its compute agent stopped each time); giving up."
    )
    [op] = operations_of(cell_db, server_id)
    assert op.state == "failed" and op.attempts == MAX_ATTEMPTS + 1


def test_a_rebuild_applies_its_values_only_when_it_succeeds(api, cloud, cell_db, agents):
    agent = agents("h1")
    for name, key in (("key1", cloud.key1), ("key2", cloud.key2)):  # the admin's own
        body = {"keypair": {"name": name, "public_key": key}}
        assert api.post("/v2.1/os-keypairs", json=body, headers=ADMIN).status_code == 200
    server_id = create_on(api, cloud, "h1", key_name="key1", user_data=b64("old"))
    agent.run_once()
    r = api.post(
        f"/v2.1/servers/{server_id}/action",
        json={
            "rebuild": {
                "imageRef": cloud.image2_id,
                "key_name": "key2",
                "user_data": b64("new"),
                "name": "renamed",
                "metadata": {"role": "web"},
            }
        },
        headers={**ADMIN, **mv("2.57")},
    )
    assert r.status_code == 202, r.text
    answered = r.json()["server"]
    # The answer shows what the rebuild will do...
    assert (answered["name"], answered["key_name"], answered["user_data"]) == (
        "renamed",
        "key2",
        b64("new"),
    )
    assert answered["metadata"] == {"role": "web"}
    # ...while the record, and so the guest's metadata and drive, keep the old values.
    with cell_db.read() as session:
        record = records.load(session, server_id)
    assert (record.instance.key_name, record.instance.user_data) == ("key1", b64("old"))
    assert (record.instance.display_name, record.metadata) == ("vm", {})
    assert record.instance.image_ref == cloud.image_id
    assert show(api, server_id)["status"] == "REBUILD"
    assert agent.run_once() == 1
    with cell_db.read() as session:
        record = records.load(session, server_id)
    assert (record.instance.key_name, record.keypairs[0]["name"]) == ("key2", "key2")
    assert (record.instance.user_data, record.instance.display_name) == (b64("new"), "renamed")
    assert record.metadata == {"role": "web"} and record.instance.image_ref == cloud.image2_id
    assert show(api, server_id)["status"] == "ACTIVE"


def test_reset_state_is_for_admins_and_cancels_the_open_operation(api, cloud, cell_db, agents):
    agent = agents("h1")
    server_id = create_on(api, cloud, "h1")
    agent.run_once()
    r = api.post(f"/v2.1/servers/{server_id}/action", json={"reboot": {"type": "HARD"}})
    assert r.status_code == 202
    [claimed] = cell_db.run(  # an agent took the reboot and is still at it
        lambda session: queue.claim(
            session, host="h1", owner=agent.owner, lease_seconds=60, limit=9
        ),
        write=True,
    )
    body = {"os-resetState": {"state": "error"}}
    r = api.post(f"/v2.1/servers/{server_id}/action", json=body)
    assert r.status_code == 403 and "reset_state" in r.json()["forbidden"]["message"]
    r = api.post(
        f"/v2.1/servers/{server_id}/action", json={"os-resetState": {"state": "paused"}},
        headers=ADMIN,
    )  # fmt: skip
    assert r.status_code == 400
    assert show(api, server_id)["status"] == "HARD_REBOOT"
    r = api.post(f"/v2.1/servers/{server_id}/action", json=body, headers=ADMIN)
    assert r.status_code == 202
    server = show(api, server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ERROR", None)
    assert [op.state for op in operations_of(cell_db, server_id)] == ["done", "cancelled"]
    assert open_events_of(cell_db, server_id) == []  # the reboot's event ended with it
    agent.steps.run(claimed, cell_db)  # the late agent writes nothing
    assert show(api, server_id)["status"] == "ERROR"
    assert "resetState" in [
        a["action"]
        for a in api.get(f"/v2.1/servers/{server_id}/os-instance-actions").json()["instanceActions"]
    ]
    # A reset server takes new operations again.
    r = api.post(
        f"/v2.1/servers/{server_id}/action",
        json={"rebuild": {"imageRef": cloud.image_id}},
    )
    assert r.status_code == 202 and agent.run_once() == 1
    assert show(api, server_id)["status"] == "ACTIVE"


def test_a_server_deleted_while_it_builds_leaves_no_event_open(api, cloud, cell_db, agents):
    """Found by the soak (bench/soak.py): a delete cancels the pending build, and the build's
    event stayed open for ever, since no agent would finish it."""
    agents("h1")  # registered, never run: the build stays pending
    server_id = create_on(api, cloud, "h1")
    assert open_events_of(cell_db, server_id) != []
    assert api.delete(f"/v2.1/servers/{server_id}").status_code == 204
    build = operations_of(cell_db, server_id)[0]
    assert (build.kind, build.state, build.error) == (
        "build",
        "cancelled",
        "the instance was deleted",
    )
    assert open_events_of(cell_db, server_id) == []
    with cell_db.read() as session:
        event = session.scalar(
            select(InstanceActionEvent).where(InstanceActionEvent.action_id == build.action_id)
        )
        assert event is not None
        assert (event.result, event.traceback) == ("Error", "the instance was deleted")


def test_no_valid_host_for_a_dead_disabled_or_full_host(api, cloud, cell_db, agents):
    agents("dead")
    agents("off")
    small = agents("small")

    def work3(session: Session) -> None:
        session.execute(
            update(Service)
            .where(Service.host == "dead")
            .values(last_seen_up=dt.datetime(2000, 1, 1))
        )
        session.execute(update(Service).where(Service.host == "off").values(disabled=True))

    cell_db.run(work3, write=True)
    for host in ("dead", "off", "nowhere"):
        server = show(api, create_on(api, cloud, host))
        assert server["status"] == "ERROR", host
        assert server["fault"]["message"] == (
            "No valid host was found. There are not enough hosts available."
        )
        assert server["OS-EXT-SRV-ATTR:host"] is None
    # "small" offers 1 vCPU x 4 (allocation ratio) and 1024 MiB - 512 reserved: one m1.tiny.
    cell_db.run(
        lambda session: session.execute(
            update(Service).where(Service.host == "small").values(disabled=False)
        ),
        write=True,
    )

    def work4(session: Session) -> None:
        session.execute(
            update(ComputeNode).where(ComputeNode.host == "small").values(vcpus=1, memory_mb=1024)
        )

    cell_db.run(work4, write=True)
    first = create_on(api, cloud, "small")
    assert show(api, first)["status"] == "BUILD"
    assert show(api, create_on(api, cloud, "small"))["status"] == "ERROR"
    small.run_once()
    assert show(api, first)["status"] == "ACTIVE"


def test_forced_hosts_are_for_admins(api, cloud):
    for body in (
        {"availability_zone": "nova:h1"},
        {"host": "h1"},
    ):
        r = api.post(
            "/v2.1/servers",
            json={
                "server": {
                    "name": "vm",
                    "imageRef": cloud.image_id,
                    "flavorRef": "1",
                    "networks": "none",
                    **body,
                }
            },
            headers=mv(V274),
        )
        assert r.status_code == 403, r.text


def test_an_agent_reconciles_its_driver_with_the_database_when_it_starts(
    api, cloud, cell_db, agents, tmp_path
):
    driver = FakeDriver(state_dir=tmp_path / "guests")
    agent = agents("h1", driver=driver)
    server_id = create_on(api, cloud, "h1")
    agent.run_once()
    gone_id = create_on(api, cloud, "h1")
    agent.run_once()
    # The agent dies; meanwhile a server is deleted (its destroy is queued) and another
    # guest vanished from the host.
    assert api.delete(f"/v2.1/servers/{gone_id}").status_code == 204
    driver.power.pop(server_id)
    (tmp_path / "guests" / f"{server_id}.json").unlink()
    restarted = FakeDriver(state_dir=tmp_path / "guests")  # what the next process finds
    assert restarted.running() == {gone_id}
    successor = agents("h1", driver=restarted)
    successor.reconcile()
    assert restarted.running() == set()  # the deleted server's guest is gone
    with cell_db.read() as session:
        assert records.load(session, server_id).instance.power_state == 0  # NOSTATE
    assert ("destroy", gone_id) in restarted.calls


@pytest.mark.parametrize("resume", [True, False], ids=["resume", "no-resume"])
def test_an_agent_finds_an_active_servers_guest_switched_off_when_it_starts(
    api, cloud, cell_db, agents, tmp_path, resume
):
    """Issue 14: the guest of an ACTIVE server is switched off when the host's next agent
    starts (the qemu driver's guests die with their service). [DEFAULT]
    resume_guests_state_on_host_boot starts it again through a queued start, an action
    'start' by the agent; without it the server is recorded SHUTOFF, an action 'stop'."""
    driver = FakeDriver(state_dir=tmp_path / "guests")
    agent = agents("h1", driver=driver)
    server_id = create_on(api, cloud, "h1", metadata={"cloudseed:ssh_forward": "true"})
    stopped_id = create_on(api, cloud, "h1")
    agent.run_once()
    r = api.post(f"/v2.1/servers/{stopped_id}/action", json={"os-stop": None}, headers=ADMIN)
    assert r.status_code == 202
    agent.run_once()
    assert ssh_forward_of(cell_db, server_id) == FAKE_SSH_FORWARD
    # The agent dies; its guests go with it (a stopped one stays stopped).
    driver.power_off(server_id)
    restarted = FakeDriver(state_dir=tmp_path / "guests")
    successor = agents("h1", driver=restarted, resume=resume)
    successor.reconcile()
    shown = show(api, server_id)
    actions = api.get(f"/v2.1/servers/{server_id}/os-instance-actions", headers=ADMIN).json()
    latest = actions["instanceActions"][0]
    assert latest["user_id"] == successor.owner
    if resume:
        assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ACTIVE", "powering-on")
        assert latest["action"] == "start"
        assert successor.run_once() == 1
        assert restarted.powered_on(server_id)
        shown = show(api, server_id)
        assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("ACTIVE", 1)
        assert ssh_forward_of(cell_db, server_id) == FAKE_SSH_FORWARD
    else:
        assert latest["action"] == "stop"
        assert successor.run_once() == 0  # nothing to do on the host
        assert not restarted.powered_on(server_id)
        assert (shown["status"], shown["OS-EXT-STS:power_state"]) == ("SHUTOFF", 4)
        assert ssh_forward_of(cell_db, server_id) is None
    r = api.get(
        f"/v2.1/servers/{server_id}/os-instance-actions/{latest['request_id']}",
        headers={**ADMIN, **mv("2.84")},
    )
    [event] = r.json()["instanceAction"]["events"]
    assert event["event"] == f"compute_{latest['action']}_instance"
    assert (event["result"], event["finish_time"] is not None) == ("Success", True)
    assert "switched off when compute agent" in event["details"]
    # The server stopped by request stays as it is, and a second agent start changes nothing.
    assert show(api, stopped_id)["status"] == "SHUTOFF"
    agents("h1", driver=restarted, resume=resume).reconcile()
    again = api.get(f"/v2.1/servers/{server_id}/os-instance-actions", headers=ADMIN).json()
    assert len(again["instanceActions"]) == len(actions["instanceActions"])
    assert ("power_on", stopped_id) not in restarted.calls


def ssh_forward_of(cell_db: Database, server_id: str) -> str | None:
    with cell_db.read() as session:
        return session.scalar(
            select(InstanceSystemMetadata.value).where(
                InstanceSystemMetadata.instance_uuid == server_id,
                InstanceSystemMetadata.key == SSH_FORWARD,
            )
        )


def test_the_agent_records_the_drivers_ssh_forward(api, cloud, cell_db, agents):
    """Issue 20: what the driver answers after each operation is the instance's system
    metadata ssh_forward (for `cloudseed server ssh` on any node); gone when the guest stops
    and when the instance is deleted, and never there for a server that did not opt in."""
    agent = agents("h1")
    opted = create_on(api, cloud, "h1", metadata={"cloudseed:ssh_forward": "true"})
    plain = create_on(api, cloud, "h1")
    assert agent.run_once() == 2
    assert ssh_forward_of(cell_db, opted) == FAKE_SSH_FORWARD
    assert ssh_forward_of(cell_db, plain) is None
    for verb, expected in (("os-stop", None), ("os-start", FAKE_SSH_FORWARD)):
        r = api.post(f"/v2.1/servers/{opted}/action", json={verb: None}, headers=ADMIN)
        assert r.status_code == 202, r.text
        assert agent.run_once() == 1
        assert ssh_forward_of(cell_db, opted) == expected
    r = api.post(f"/v2.1/servers/{opted}/action", json={"reboot": {"type": "HARD"}}, headers=ADMIN)
    assert r.status_code == 202 and agent.run_once() == 1
    assert ssh_forward_of(cell_db, opted) == FAKE_SSH_FORWARD
    for server_id in (opted, plain):
        assert api.delete(f"/v2.1/servers/{server_id}", headers=ADMIN).status_code == 204
    agent.run_once()
    assert ssh_forward_of(cell_db, opted) is None


def test_builds_claimed_together_record_a_failing_one_apart(api, cloud, cell_db, agents):
    """Issue 36: builds claimed in one pass read their records together; the one whose spawn
    fails ends in ERROR with its reason, the others ACTIVE, each with its own event."""
    driver = FakeDriver()
    agent = agents("h1", driver=driver)
    ids = [create_on(api, cloud, "h1") for _ in range(3)]
    driver.fail("spawn", uuid=ids[1], message="no room for the disk")
    assert agent.run_once() == 3
    assert [show(api, i)["status"] for i in ids] == ["ACTIVE", "ERROR", "ACTIVE"]
    assert "no room for the disk" in show(api, ids[1])["fault"]["message"]
    assert [operations_of(cell_db, i)[0].state for i in ids] == ["done", "failed", "done"]
    for server_id, result in zip(ids, ("Success", "Error", "Success"), strict=True):
        [build] = [e for e in events(api, server_id) if e["event"] == BUILD_EVENT]
        assert build["result"] == result and build["finish_time"] is not None


def test_build_successes_written_in_one_transaction_keep_each_ones_rules(
    api, cloud, cell_db, agents
):
    """The group commit (agent/build_outcomes.py): of four builds written together, the one
    whose lease went to another agent is left to it, the one whose instance is gone is handed
    back to be written alone, and the other two are done: ACTIVE, their event a success, their
    ssh_forward recorded, their boot key set kept, a change feed row each."""
    agent = agents("h1")
    ids = [create_on(api, cloud, "h1") for _ in range(3)]
    ids.append(create_on(api, cloud, "h1", metadata={"cloudseed:ssh_forward": "true"}))
    claimed = cell_db.run(
        lambda session: queue.claim(
            session, host="h1", owner=agent.owner, lease_seconds=60, limit=10
        ),
        write=True,
    )
    assert [op.instance_uuid for op in claimed] == ids
    taken, gone = ids[1], ids[2]

    def meanwhile(session: Session) -> None:
        session.execute(
            update(Operation)
            .where(Operation.instance_uuid == taken)
            .values(lease_owner="another-agent")
        )
        session.execute(update(Instance).where(Instance.uuid == gone).values(deleted=1))

    cell_db.run(meanwhile, write=True)
    with cell_db.read() as session:
        generations = dict(session.execute(select(Instance.uuid, Instance.generation)).all())
    batch = [
        Built(op, cell_db, FAKE_SSH_FORWARD if op.instance_uuid == ids[3] else None)
        for op in claimed
    ]
    agent.steps.builds.write_batch(batch)
    assert [b.result for b in batch] == ["written", "lost", "alone", "written"]
    assert [operations_of(cell_db, i)[0].state for i in ids] == [
        "done",
        "running",
        "running",
        "done",
    ]
    assert show(api, ids[0])["status"] == "ACTIVE" and show(api, taken)["status"] == "BUILD"
    assert ssh_forward_of(cell_db, ids[3]) == FAKE_SSH_FORWARD
    assert ssh_forward_of(cell_db, ids[0]) is None
    with cell_db.read() as session:
        for server_id in (ids[0], ids[3]):
            record = records.load(session, server_id)
            assert record.instance.launched_at is not None
            # A boot, not a change: the generation stays, the feed says it boots.
            assert record.instance.generation == generations[server_id]
            assert record.extra.keys_pushed == "[]"  # no key pair: the boot set is empty
            assert session.scalars(
                select(GuestChange.boot).where(GuestChange.instance_uuid == server_id)
            ).all() == [True]
        assert records.load(session, taken).instance.generation == generations[taken]
        assert not session.scalar(select(GuestChange.id).where(GuestChange.instance_uuid == taken))
    [build] = [e for e in events(api, ids[3]) if e["event"] == BUILD_EVENT]
    assert build["result"] == "Success" and build["finish_time"] is not None
    assert [e["finish_time"] for e in events(api, taken) if e["event"] == BUILD_EVENT] == [None]
    assert "admin_password" not in (operations_of(cell_db, ids[0])[0].payload or "")
