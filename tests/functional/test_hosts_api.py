"""os-services and os-hypervisors on each database: what the hosts' agents registered, their
liveness, disabling and forcing down (before and from 2.53), and admin-only access."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from cloudseed.agent.worker import Agent
from cloudseed.cells.service import CellDatabases
from cloudseed.compute.fake import FakeDriver
from cloudseed.db.engines import Database
from cloudseed.hosts.models import ComputeNode, Service
from cloudseed.settings import Settings
from tests.support.cloud import make_cloud, mv

ADMIN = {"X-Auth-Token": "admin:proj"}


@pytest.fixture()
def hosts(migrated_settings: Settings, api_db: Database) -> Iterator[Callable[[str], Agent]]:
    made: list[tuple[Agent, CellDatabases]] = []

    def make(host: str) -> Agent:
        cells = CellDatabases(api_db)
        agent = Agent(migrated_settings, host=host, cells=cells, driver=FakeDriver())
        agent.register()
        made.append((agent, cells))
        return agent

    yield make

    def work(session: Session) -> None:
        names = [a.host for a, _ in made]
        session.execute(delete(ComputeNode).where(ComputeNode.host.in_(names)))
        session.execute(delete(Service).where(Service.host.in_(names)))

    api_db.run(work, write=True)
    for _, cells in made:
        cells.dispose()


def services(api, version: str = "2.1", **query: str) -> dict[str, dict[str, Any]]:
    r = api.get("/v2.1/os-services", params=query, headers={**ADMIN, **mv(version)})
    assert r.status_code == 200, r.text
    return {s["host"]: s for s in r.json()["services"]}


def test_services_show_liveness_and_take_changes(api, cell_db, hosts):
    hosts("alive")
    hosts("gone")

    def work2(session: Session) -> None:
        session.execute(
            update(Service)
            .where(Service.host == "gone")
            .values(last_seen_up=dt.datetime(2000, 1, 1))
        )

    cell_db.run(work2, write=True)
    shown = services(api, "2.11")
    assert (shown["alive"]["state"], shown["alive"]["status"]) == ("up", "enabled")
    assert shown["gone"]["state"] == "down"
    assert shown["alive"]["binary"] == "nova-compute" and shown["alive"]["zone"] == "nova"
    assert isinstance(shown["alive"]["id"], int) and shown["alive"]["forced_down"] is False
    assert list(services(api, host="alive")) == ["alive"]
    # Before 2.53: by host and binary.
    r = api.put(
        "/v2.1/os-services/disable-log-reason",
        json={"host": "alive", "binary": "nova-compute", "disabled_reason": "disk swap"},
        headers=ADMIN,
    )
    assert r.json() == {
        "service": {
            "host": "alive",
            "binary": "nova-compute",
            "status": "disabled",
            "disabled_reason": "disk swap",
        }
    }
    r = api.put(
        "/v2.1/os-services/force-down",
        json={"host": "alive", "binary": "nova-compute", "forced_down": True},
        headers={**ADMIN, **mv("2.11")},
    )
    assert r.status_code == 200 and r.json()["service"]["forced_down"] is True
    assert services(api, "2.11")["alive"]["state"] == "down"
    r = api.put(
        "/v2.1/os-services/enable",
        json={"host": "nowhere", "binary": "nova-compute"},
        headers=ADMIN,
    )
    assert r.status_code == 404 and r.json()["itemNotFound"]["message"] == (
        "Host nowhere could not be found."
    )
    # From 2.53: by uuid.
    uuid = services(api, "2.53")["alive"]["id"]
    r = api.put(
        f"/v2.1/os-services/{uuid}",
        json={"status": "enabled", "forced_down": False},
        headers={**ADMIN, **mv("2.53")},
    )
    assert r.status_code == 200, r.text
    view = r.json()["service"]
    assert (view["status"], view["state"], view["disabled_reason"]) == ("enabled", "up", None)
    r = api.put(
        f"/v2.1/os-services/{uuid}",
        json={"status": "enabled", "disabled_reason": "x"},
        headers={**ADMIN, **mv("2.53")},
    )
    assert r.status_code == 400
    r = api.delete(f"/v2.1/os-services/{uuid}", headers={**ADMIN, **mv("2.53")})
    assert r.status_code == 204 and "alive" not in services(api)


def test_hypervisors_and_their_usage(api, api_db, hosts, tmp_path):
    agent = hosts("hv1")
    cloud = make_cloud(api, api_db, tmp_path)
    body = {"server": {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1",
                       "networks": "none", "host": "hv1"}}  # fmt: skip
    assert api.post("/v2.1/servers", json=body, headers={**ADMIN, **mv("2.74")}).status_code == 202
    agent.run_once()
    r = api.get("/v2.1/os-hypervisors", headers=ADMIN)
    [listed] = [h for h in r.json()["hypervisors"] if h["hypervisor_hostname"] == "hv1"]
    assert set(listed) == {"id", "hypervisor_hostname", "state", "status"}
    r = api.get("/v2.1/os-hypervisors/detail", headers=ADMIN)
    [detail] = [h for h in r.json()["hypervisors"] if h["hypervisor_hostname"] == "hv1"]
    assert (detail["vcpus"], detail["vcpus_used"], detail["memory_mb_used"]) == (1000, 1, 512)
    assert (detail["running_vms"], detail["hypervisor_type"]) == (1, "fake")
    assert detail["service"]["host"] == "hv1"
    r = api.get(f"/v2.1/os-hypervisors/{detail['id']}", headers=ADMIN)
    assert r.json()["hypervisor"]["hypervisor_hostname"] == "hv1"
    r = api.get("/v2.1/os-hypervisors/detail", headers={**ADMIN, **mv("2.88")})
    [new] = [h for h in r.json()["hypervisors"] if h["hypervisor_hostname"] == "hv1"]
    assert "vcpus" not in new and "uptime" in new and isinstance(new["id"], str)
    assert api.get("/v2.1/os-hypervisors/nope", headers=ADMIN).status_code == 404


def test_hosts_are_for_admins(api):
    for path in ("/v2.1/os-services", "/v2.1/os-hypervisors", "/v2.1/os-hypervisors/detail"):
        r = api.get(path)
        assert r.status_code == 403 and "Policy doesn't allow" in r.text, path
