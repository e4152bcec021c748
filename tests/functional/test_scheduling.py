"""Where new servers go, on each database: the availability zone a server is in, and the
``same_host``/``different_host`` scheduler hints (Nova's SameHostFilter and DifferentHostFilter).

The hosts here are registered rows with no agent, so their servers stay in BUILD: placement is
all these tests look at. The session-wide test server's own host (zone "nova") is a candidate
too, as in a cloud with more hosts than a test names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session

from cloudseed.compute.interfaces import Capacity
from cloudseed.db.engines import Database
from cloudseed.hosts import service as hosts
from cloudseed.hosts.models import ComputeNode, Service
from tests.support.cloud import mv

ADMIN = {"X-Auth-Token": "admin:proj"}


@pytest.fixture()
def add_host(cell_db: Database) -> Iterator[Callable[..., None]]:
    """Register a compute host with room for m1.tiny servers: ``add_host("h1", "az1")``."""
    made: list[str] = []

    def add(host: str, zone: str = "nova", memory_mb: int = 8192) -> None:
        capacity = Capacity(vcpus=8, memory_mb=memory_mb, disk_gb=100, hypervisor_type="fake")
        cell_db.run(
            lambda session: hosts.register(session, host=host, zone=zone, capacity=capacity),
            write=True,
        )
        made.append(host)

    yield add

    def work(session: Session) -> None:
        session.execute(delete(ComputeNode).where(ComputeNode.host.in_(made)))
        session.execute(delete(Service).where(Service.host.in_(made)))

    cell_db.run(work, write=True)


def create(api: httpx.Client, cloud, *, headers=None, hints=None, **fields) -> str:
    body: dict[str, Any] = {
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


def show(api: httpx.Client, server_id: str, version: str = "2.104") -> dict[str, Any]:
    r = api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv(version)})
    assert r.status_code == 200, r.text
    server: dict[str, Any] = r.json()["server"]
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


def host_of(api: httpx.Client, server_id: str) -> str | None:
    host: str | None = show(api, server_id)["OS-EXT-SRV-ATTR:host"]
    return host


def test_same_host_places_beside_the_named_servers(api, cloud, add_host):
    # Without the hint h-roomy would win: it has the most free RAM of zone az-same.
    add_host("h-same", "az-same", memory_mb=2048)
    add_host("h-roomy", "az-same")
    first = create(api, cloud, headers=ADMIN, host="h-same")
    assert host_of(api, create(api, cloud, availability_zone="az-same")) == "h-roomy"
    beside = create(api, cloud, hints={"same_host": first}, availability_zone="az-same")
    assert host_of(api, beside) == "h-same"
    # The legacy key, and a list (several servers: any of their hosts).
    r = api.post(
        "/v2.1/servers",
        json={
            "server": {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1"},
            "OS-SCH-HNT:scheduler_hints": {"same_host": [first, beside]},
        },
    )
    assert r.status_code == 202, r.text
    assert host_of(api, r.json()["server"]["id"]) == "h-same"


def test_different_host_keeps_away_from_the_named_servers(api, cloud, add_host):
    # Without the hint h-busy would win: it has the most free RAM of zone az-diff.
    add_host("h-busy", "az-diff")
    add_host("h-small", "az-diff", memory_mb=2048)
    first = create(api, cloud, headers=ADMIN, host="h-busy")
    assert host_of(api, create(api, cloud, availability_zone="az-diff")) == "h-busy"
    away = create(api, cloud, hints={"different_host": [first]}, availability_zone="az-diff")
    assert host_of(api, away) == "h-small"


def test_a_same_host_naming_no_placed_server_places_nothing(api, cloud, add_host):
    add_host("h-any")
    server_id = create(api, cloud, hints={"same_host": "00000000-0000-4000-8000-000000000000"})
    shown = show(api, server_id)
    assert shown["status"] == "ERROR"
    assert shown["fault"]["message"].startswith("No valid host was found.")


def test_hints_are_shown_as_nova_keeps_them_from_2_100(api, cloud, add_host):
    add_host("h-shown")
    first = create(api, cloud, headers=ADMIN, host="h-shown")
    hints = {
        "same_host": first,
        "query": {"a": 1},
        "target_cell": "cell1",
        "build_near_host_ip": "10.0.0.1",
        "cidr": "/24",
        "my_filter": 3,
    }
    server_id = create(api, cloud, hints=hints)
    assert show(api, server_id, "2.100")["scheduler_hints"] == {
        "same_host": [first],
        "query": ["{'a': 1}"],  # Nova's string field: str() of the value
        "target_cell": ["cell1"],
        "build_near_host_ip": ["10.0.0.1"],
        "cidr": ["/24"],
        "my_filter": ["3"],
    }
    assert "scheduler_hints" not in show(api, server_id, "2.99")
    assert show(api, first, "2.100")["scheduler_hints"] == {}


@pytest.mark.parametrize(
    "hints, message",
    [
        (
            {"group": "11111111-2222-4333-8444-555555555555"},
            "Instance group 11111111-2222-4333-8444-555555555555 could not be found.",
        ),
        ({"different_host": "not-a-uuid"}, "'not-a-uuid' is not a 'uuid'"),
        ({"same_host": ["not-a-uuid"]}, "'not-a-uuid' is not a 'uuid'"),
        ({"build_near_host_ip": "near"}, "field/attribute build_near_host_ip. Value: near."),
        ({"cidr": "24"}, "Invalid input for field/attribute cidr."),
        ("same_host", "Invalid input for field/attribute os:scheduler_hints."),
    ],
)
def test_malformed_hints_are_refused(api, cloud, hints, message):
    r = api.post(
        "/v2.1/servers",
        json={
            "server": {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1"},
            "os:scheduler_hints": hints,
        },
    )
    assert r.status_code == 400, r.text
    assert message in r.json()["badRequest"]["message"]
    assert api.get("/v2.1/servers").json()["servers"] == []
