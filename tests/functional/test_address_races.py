"""Concurrent creates on one network: each transaction picks the lowest free addresses it can
see, so two at once pick the same ones; the one that loses is run again, not refused. On
PostgreSQL and MariaDB, whose writers run at the same time."""

from __future__ import annotations

import concurrent.futures
import threading

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.errors import Conflict
from cloudseed.networks import service as networks
from cloudseed.networks.models import IPAllocation
from tests.support.cloud import Cloud, wait_for

# SQLite queues its writers (BEGIN IMMEDIATE): the second reads what the first committed.
pytestmark = pytest.mark.parametrize("backend", ("postgresql", "mariadb"), indirect=True)


def test_an_address_taken_meanwhile_is_a_conflict(api_db: Database, clean_api_db: Database):
    net = api_db.run(
        lambda session: networks.add_network(
            session, name="n1", cidr="10.9.0.0/29", gateway="10.9.0.1"
        ),
        write=True,
    )
    both_chose = threading.Barrier(2, timeout=30)
    first_committed = threading.Event()

    def first() -> str:
        def work2(session: Session) -> networks.PortPlan:
            plan = networks.allocate(session, network=net, instance_uuid="i1")
            both_chose.wait()
            networks.flush_allocations(session)
            return plan

        # Once: the barrier is the test's, and the conflict is what it is after.
        plan = api_db.run(work2, write=True, attempts=1)
        first_committed.set()
        return plan.address

    def second() -> str:
        def work3(session: Session) -> networks.PortPlan:
            plan = networks.allocate(session, network=net, instance_uuid="i2")
            both_chose.wait()
            first_committed.wait(30)
            networks.flush_allocations(session)
            return plan

        plan = api_db.run(work3, write=True, attempts=1)
        return plan.address

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        won, lost = pool.submit(first), pool.submit(second)
        assert won.result() == "10.9.0.2"
        with pytest.raises(Conflict, match="taken by a concurrent request"):
            lost.result()
    with api_db.read() as session:
        rows = session.execute(select(IPAllocation.instance_uuid, IPAllocation.address)).all()
    assert [tuple(r) for r in rows] == [("i1", "10.9.0.2")]


def test_concurrent_creates_all_get_distinct_addresses(api: httpx.Client, cloud: Cloud):
    start = threading.Barrier(4, timeout=30)

    def create() -> list[str]:
        start.wait()
        body = {
            "name": "vm",
            "imageRef": cloud.image_id,
            "flavorRef": "1",
            "min_count": 2,
            "max_count": 2,
            "return_reservation_id": True,
        }
        r = api.post("/v2.1/servers", json={"server": body})
        assert r.status_code == 202, r.text
        servers = api.get(
            "/v2.1/servers", params={"reservation_id": r.json()["reservation_id"]}
        ).json()["servers"]
        return [s["id"] for s in servers]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        ids = [i for batch in pool.map(lambda _: create(), range(4)) for i in batch]
    assert len(ids) == 8
    addresses = [wait_for(api, i, "ACTIVE")["addresses"]["private"][0]["addr"] for i in ids]
    assert sorted(addresses, key=lambda a: int(a.rsplit(".", 1)[1])) == [
        f"10.0.0.{n}" for n in range(3, 11)
    ]
