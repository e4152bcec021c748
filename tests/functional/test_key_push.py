"""The compute agent's ``keys`` operations (agent/key_operations.py), on each database, with the
fake driver's guest agent: a change of a running server's keys reaches the guest and is recorded
applied via the guest agent; a guest without an agent fails after the retries with the reason; an
older operation never undoes a newer one; a stopped guest gets the change when it starts; expired
keys are taken off the guest.

The API that changes keys (2.106) is written elsewhere; ``change_keys`` does what it stores and
queues (docs of the contract: servers/live_keys/delivery.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from cloudseed.agent.worker import Agent
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.fake import FakeDriver
from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.images.models import Image
from cloudseed.servers.lifecycle import queue
from cloudseed.servers.live_keys import delivery as key_delivery
from cloudseed.servers.models import Instance, InstanceExtra, Operation
from cloudseed.settings import Settings
from tests.support import keys
from tests.support.cloud import Cloud, make_cloud, mv

ADMIN = {"X-Auth-Token": "admin:proj"}
HOST = "keys-host"


@pytest.fixture()
def cloud(api: httpx.Client, api_db: Database, tmp_path: Any) -> Cloud:
    made = make_cloud(api, api_db, tmp_path)
    for name, key in (("key1", made.key1), ("key2", made.key2)):  # the admin's own
        body = {"keypair": {"name": name, "public_key": key}}
        assert api.post("/v2.1/os-keypairs", json=body, headers=ADMIN).status_code == 200
    return made


@pytest.fixture()
def driver() -> FakeDriver:
    return FakeDriver()


@pytest.fixture()
def agent(migrated_settings: Settings, api_db: Database, driver: FakeDriver) -> Iterator[Agent]:
    """A registered agent of HOST that the test drives (``run_once``), retrying pushes fast."""
    settings = dataclasses.replace(
        migrated_settings,
        compute=dataclasses.replace(migrated_settings.compute, lease_seconds=30),
    )
    cells = CellDatabases(api_db)
    made = Agent(settings, host=HOST, cells=cells, driver=driver)
    assert made.steps.keys is not None
    made.steps.keys.delays = (0.01, 0.01, 0.01)
    made.register()
    yield made
    cells.dispose()

    def work(session: Session) -> None:
        session.execute(delete(ComputeNode).where(ComputeNode.host == HOST))
        session.execute(delete(Service).where(Service.host == HOST))

    api_db.run(work, write=True)


def create_active(api: httpx.Client, cloud: Cloud, agent: Agent, **fields: Any) -> str:
    body = {
        "name": "vm",
        "imageRef": cloud.image_id,
        "flavorRef": "1",
        "networks": "none",
        "host": HOST,
        **fields,
    }
    r = api.post("/v2.1/servers", json={"server": body}, headers={**ADMIN, **mv("2.74")})
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    assert agent.run_once() == 1
    assert extra_of(agent, server_id).instance_uuid == server_id
    return server_id


def entry(name: str, public_key: str, expires_at: dt.datetime | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "user_id": "admin",
        "fingerprint": keys.md5_fingerprint(public_key),
        "public_key": public_key,
        "type": "ssh",
        "expires_at": expires_at.isoformat() + "Z" if expires_at else None,
        "source": "server",
    }


def change_keys(cell_db: Database, server_id: str, entries: list[dict[str, Any]]) -> int:
    """What the API does on a change of the key set: a new generation, and an operation."""

    def work2(session: Session) -> int:
        extra = session.scalar(
            select(InstanceExtra).where(InstanceExtra.instance_uuid == server_id)
        )
        assert extra is not None
        generation = extra.keys_generation + 1
        extra.keys_generation = generation
        extra.keypairs = json.dumps(
            [{"since_generation": generation, **e} for e in entries], sort_keys=True
        )
        queue.enqueue(
            session,
            instance_uuid=server_id,
            kind="keys",
            host=HOST,
            payload={"generation": generation},
        )
        return generation

    return cell_db.run(work2, write=True)


def extra_of(agent: Agent, server_id: str) -> InstanceExtra:
    [cell] = agent.cells.all_cells()
    with cell.read() as session:
        extra = session.scalar(
            select(InstanceExtra).where(InstanceExtra.instance_uuid == server_id)
        )
        assert extra is not None
        session.expunge(extra)
        return extra


def key_ops(cell_db: Database, server_id: str) -> list[Operation]:
    with cell_db.read() as session:
        return list(
            session.scalars(
                select(Operation)
                .where(Operation.instance_uuid == server_id, Operation.kind == "keys")
                .order_by(Operation.id)
            )
        )


def pushes(driver: FakeDriver, server_id: str) -> int:
    return driver.calls.count(("push_keys", server_id))


def test_a_change_reaches_the_running_guest_and_is_applied_via_the_guest_agent(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent, driver: FakeDriver
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    # The build recorded the boot set as what cloudseed put on the guest.
    assert json.loads(extra_of(agent, server_id).keys_pushed or "null") == [cloud.key1]
    driver.authorized[server_id] = {"root": [cloud.key1]}  # what cloud-init wrote at boot
    key3 = keys.ed25519_public("three")
    pem, fingerprint = keys.self_signed_pem()
    certificate = {**entry("winrm", cloud.key1), "type": "x509", "public_key": pem}
    certificate["fingerprint"] = fingerprint  # not an authorized_keys line: never pushed
    generation = change_keys(
        cell_db,
        server_id,
        [entry("key2", cloud.key2), certificate, entry("key3", key3 + "\n")],
    )
    assert agent.run_once() == 1
    assert driver.authorized[server_id] == {"root": [cloud.key2, key3]}
    extra = extra_of(agent, server_id)
    assert json.loads(extra.keys_pushed or "null") == [cloud.key2, key3]
    delivery = key_delivery.delivery_of(extra)
    assert (delivery.state, delivery.via, delivery.applied_generation) == (
        "applied",
        "guest agent",
        generation,
    )
    [op] = key_ops(cell_db, server_id)
    assert (op.state, op.error) == ("done", None)
    # No instance change: still ACTIVE, no fault, no task.
    with cell_db.read() as session:
        instance = session.scalar(select(Instance).where(Instance.uuid == server_id))
        assert instance is not None
        assert (instance.vm_state, instance.task_state) == ("active", None)
        assert extra.fault is None


def test_the_login_user_is_the_images_admin_user(
    api: httpx.Client,
    cloud: Cloud,
    api_db: Database,
    cell_db: Database,
    agent: Agent,
    driver: FakeDriver,
) -> None:
    def work3(session: Session) -> None:
        session.execute(
            update(Image)
            .where(Image.uuid == cloud.image_id)
            .values(properties=json.dumps({"os_admin_user": "debian"}))
        )

    api_db.run(work3, write=True)
    server_id = create_active(api, cloud, agent, key_name="key1")
    change_keys(cell_db, server_id, [entry("key2", cloud.key2)])
    agent.run_once()
    assert driver.authorized[server_id] == {"debian": [cloud.key2]}


def test_without_an_agent_the_push_fails_after_its_retries_with_the_reason(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent, driver: FakeDriver
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    driver.guest_agent(False, uuid=server_id)
    generation = change_keys(cell_db, server_id, [entry("key2", cloud.key2)])
    assert agent.run_once() == 1
    assert pushes(driver, server_id) == 4  # the first try and three retries
    reason = (
        "the guest agent did not answer the guest-sync-delimited handshake (fake driver: no agent)"
    )
    [op] = key_ops(cell_db, server_id)
    assert (op.state, op.error) == ("failed", reason)
    extra = extra_of(agent, server_id)
    delivery = key_delivery.delivery_of(extra)
    assert (delivery.state, delivery.reason, delivery.generation) == ("failed", reason, generation)
    assert delivery.applied_generation == 0
    assert json.loads(extra.keys_pushed or "null") == [cloud.key1]  # nothing confirmed
    assert extra.fault is None  # a failed delivery is not the server's fault
    # The agent comes up; the next change gets through and clears the failure.
    driver.guest_agent(True)
    generation = change_keys(cell_db, server_id, [entry("key1", cloud.key1)])
    agent.run_once()
    assert driver.authorized[server_id] == {"root": [cloud.key1]}
    delivery = key_delivery.delivery_of(extra_of(agent, server_id))
    assert (delivery.state, delivery.applied_generation) == ("applied", generation)


def test_an_older_operation_never_undoes_a_newer_generation(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent, driver: FakeDriver
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    change_keys(cell_db, server_id, [entry("key1", cloud.key1), entry("key2", cloud.key2)])
    latest = change_keys(cell_db, server_id, [entry("key2", cloud.key2)])
    assert agent.run_once() == 2  # the older one first: superseded, no push
    assert pushes(driver, server_id) == 1
    assert driver.authorized[server_id] == {"root": [cloud.key2]}
    assert [(op.state, op.error) for op in key_ops(cell_db, server_id)] == [
        ("done", None),
        ("done", None),
    ]

    # A late operation of an old generation (a resumed one, say) changes nothing.
    def work4(session: Session) -> None:
        queue.enqueue(
            session,
            instance_uuid=server_id,
            kind="keys",
            host=HOST,
            payload={"generation": latest - 1},
        )

    cell_db.run(work4, write=True)
    agent.run_once()
    assert pushes(driver, server_id) == 1
    delivery = key_delivery.delivery_of(extra_of(agent, server_id))
    assert (delivery.applied_generation, delivery.via) == (latest, "guest agent")


def test_a_stopped_guest_gets_the_change_when_it_starts(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent, driver: FakeDriver
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    r = api.post(f"/v2.1/servers/{server_id}/action", json={"os-stop": None}, headers=ADMIN)
    assert r.status_code == 202 and agent.run_once() == 1
    generation = change_keys(cell_db, server_id, [entry("key2", cloud.key2)])
    assert agent.run_once() == 1
    assert pushes(driver, server_id) == 0  # no use trying
    [op] = key_ops(cell_db, server_id)
    assert (op.state, op.error) == ("failed", "guest is not running")
    delivery = key_delivery.delivery_of(extra_of(agent, server_id))
    assert (delivery.state, delivery.reason) == ("failed", "guest is not running")
    r = api.post(f"/v2.1/servers/{server_id}/action", json={"os-start": None}, headers=ADMIN)
    assert r.status_code == 202
    assert agent.run_once() == 1  # the start, which queues a push...
    assert agent.run_once() == 1  # ...that runs next
    assert driver.authorized[server_id] == {"root": [cloud.key2]}
    delivery = key_delivery.delivery_of(extra_of(agent, server_id))
    assert (delivery.state, delivery.via, delivery.applied_generation) == (
        "applied",
        "guest agent",
        generation,
    )
    # A reboot with nothing new to deliver queues nothing.
    r = api.post(
        f"/v2.1/servers/{server_id}/action", json={"reboot": {"type": "HARD"}}, headers=ADMIN
    )
    assert r.status_code == 202 and agent.run_once() == 1
    assert agent.run_once() == 0 and len(key_ops(cell_db, server_id)) == 2


def expire(cell_db: Database, server_id: str, name: str) -> None:
    """Let the key ``name`` expire (as time passing would, without a new generation)."""

    def work5(session: Session) -> None:
        extra = session.scalar(
            select(InstanceExtra).where(InstanceExtra.instance_uuid == server_id)
        )
        assert extra is not None
        past = (utcnow() - dt.timedelta(seconds=1)).isoformat() + "Z"
        extra.keypairs = json.dumps(
            [
                {**e, "expires_at": past} if e["name"] == name else e
                for e in json.loads(extra.keypairs or "[]")
            ],
            sort_keys=True,
        )

    cell_db.run(work5, write=True)


def test_expired_keys_are_taken_off_the_guest(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent, driver: FakeDriver
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    soon = utcnow() + dt.timedelta(hours=1)
    generation = change_keys(
        cell_db, server_id, [entry("key1", cloud.key1, expires_at=soon), entry("key2", cloud.key2)]
    )
    agent.run_once()
    assert driver.authorized[server_id] == {"root": [cloud.key1, cloud.key2]}
    assert agent.expire_keys() == 0  # nothing has expired
    expire(cell_db, server_id, "key1")
    assert agent.expire_keys() == 1
    assert agent.expire_keys() == 0  # queued once
    assert agent.run_once() == 1
    assert driver.authorized[server_id] == {"root": [cloud.key2]}
    extra = extra_of(agent, server_id)
    assert json.loads(extra.keys_pushed or "null") == [cloud.key2]
    assert key_delivery.delivery_of(extra).applied_generation == generation
    assert agent.expire_keys() == 0  # nothing left to take off


def test_an_expiry_push_that_fails_is_not_retried_for_ever(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent, driver: FakeDriver
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    # The boot set holds key1; it expires, and the guest has no agent.
    expire(cell_db, server_id, "key1")
    driver.guest_agent(False)
    assert agent.expire_keys() == 1
    agent.run_once()
    [op] = key_ops(cell_db, server_id)
    assert op.state == "failed" and "no agent" in (op.error or "")
    assert agent.expire_keys() == 0  # tried after the expiry: the reason stands
    # The boot generation stays applied as it was: an expiry is not a new generation.
    assert key_delivery.delivery_of(extra_of(agent, server_id)).generation == 1


def test_a_server_of_another_host_or_not_active_is_left_alone(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    expire(cell_db, server_id, "key1")
    cell_db.run(
        lambda session: session.execute(
            update(Instance).where(Instance.uuid == server_id).values(host="other")
        ),
        write=True,
    )
    assert agent.expire_keys() == 0

    def work6(session: Session) -> None:
        session.execute(
            update(Instance).where(Instance.uuid == server_id).values(host=HOST, vm_state="stopped")
        )

    cell_db.run(work6, write=True)
    assert agent.expire_keys() == 0


def test_a_keys_operation_interrupted_too_often_fails_the_delivery_only(
    api: httpx.Client, cloud: Cloud, cell_db: Database, agent: Agent
) -> None:
    server_id = create_active(api, cloud, agent, key_name="key1")
    generation = change_keys(cell_db, server_id, [entry("key2", cloud.key2)])
    for attempt in range(3):

        def work7(session: Session, attempt: int = attempt) -> None:
            [_taken] = queue.claim(
                session, host=HOST, owner=f"dead-{attempt}", lease_seconds=60, limit=9
            )
            session.execute(
                update(Operation)
                .where(Operation.instance_uuid == server_id, Operation.state == "running")
                .values(lease_expires_at=dt.datetime(2000, 1, 1))
            )

        cell_db.run(work7, write=True)
    assert agent.run_once() == 0  # given up
    delivery = key_delivery.delivery_of(extra_of(agent, server_id))
    assert (delivery.state, delivery.generation) == ("failed", generation)
    assert "interrupted 3 times" in (delivery.reason or "")
    with cell_db.read() as session:
        instance = session.scalar(select(Instance).where(Instance.uuid == server_id))
        assert instance is not None and instance.vm_state == "active"
