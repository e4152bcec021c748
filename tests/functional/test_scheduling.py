"""Where new servers go, on each database: the availability zone a server is in, and the
``same_host``/``different_host`` scheduler hints (Nova's SameHostFilter and DifferentHostFilter).

The hosts here are registered rows with no agent, so their servers stay in BUILD: placement is
all these tests look at. The session-wide test server's own host (zone "nova") is a candidate
too, as in a cloud with more hosts than a test names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from sqlalchemy import delete

from cloudseed.compute.interfaces import Capacity
from cloudseed.db.engines import Database
from cloudseed.hosts import service as hosts
from cloudseed.hosts.models import ComputeNode, Service
from tests.support.cloud import make_cloud, mv

ADMIN = {"X-Auth-Token": "admin:proj"}


@pytest.fixture()
def cloud(api, api_db, tmp_path):
    return make_cloud(api, api_db, tmp_path)


@pytest.fixture()
def add_host(cell_db: Database) -> Iterator[Callable[..., None]]:
    """Register a compute host with room for a few m1.tiny servers: ``add_host("h1", "az1")``."""
    made: list[str] = []

    def add(host: str, zone: str = "nova") -> None:
        capacity = Capacity(vcpus=8, memory_mb=8192, disk_gb=100, hypervisor_type="fake")
        with cell_db.write() as session:
            hosts.register(session, host=host, zone=zone, capacity=capacity)
        made.append(host)

    yield add
    with cell_db.write() as session:
        session.execute(delete(ComputeNode).where(ComputeNode.host.in_(made)))
        session.execute(delete(Service).where(Service.host.in_(made)))


def create(api: httpx.Client, cloud, *, headers=None, hints=None, **fields) -> str:
    body: dict = {
        "server": {
            "name": "vm",
            "imageRef": cloud.image_id,
            "flavorRef": "1",
            "networks": "none",
            **fields,
        }
    }
    if hints is not None:
        body["os:scheduler_hints"] = hints
    r = api.post("/v2.1/servers", json=body, headers={**mv("2.74"), **(headers or {})})
    assert r.status_code == 202, r.text
    server_id: str = r.json()["server"]["id"]
    return server_id


def show(api: httpx.Client, server_id: str, version: str = "2.104") -> dict:
    r = api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv(version)})
    assert r.status_code == 200, r.text
    server: dict = r.json()["server"]
    return server


def test_a_server_is_in_its_hosts_zone(api, cloud, add_host):
    """Nova's conductor records the chosen host's zone on the instance: it is what
    ``OS-EXT-AZ:availability_zone`` shows, whether or not the request named a zone."""
    add_host("h-az1", "az1")
    on_host = create(api, cloud, headers=ADMIN, host="h-az1")
    assert show(api, on_host)["OS-EXT-AZ:availability_zone"] == "az1"
    # An admin's "zone:host" is the zone az1 and the host, never the text as given.
    forced = create(api, cloud, headers=ADMIN, availability_zone="az1:h-az1")
    shown = show(api, forced)
    assert (shown["OS-EXT-SRV-ATTR:host"], shown["OS-EXT-AZ:availability_zone"]) == (
        "h-az1",
        "az1",
    )
    in_zone = create(api, cloud, availability_zone="az1")
    assert show(api, in_zone)["OS-EXT-AZ:availability_zone"] == "az1"
