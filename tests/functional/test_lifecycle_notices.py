"""Acknowledged lifecycle notices (2.111) over real HTTP on every backend, with the test
server's own compute agent and a real metadata listener: a notice holds the operation back, the
guest sees it (both trees, long-polled) and acknowledges it, which starts it at once; a notice
that runs out starts it unacknowledged; a delete with a notice; project defaults; and what the
guest must not be able to do (acknowledge another server's event, replay, garbage). Killed
processes during a notice: test_lifecycle_notice_crashes.py."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from typing import Any

import httpx
import pytest

from cloudseed.db.engines import Database
from tests.support.cloud import Cloud, mv, wait_for
from tests.support.guests import boot
from tests.support.snapshot import changes, snapshot
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

V = mv("2.111")
ADMIN = {"X-Auth-Token": "admin:proj", **V}
EVENTS = "/openstack/latest/events.json"
EC2_SCHEDULED = "/latest/meta-data/events/maintenance/scheduled"
EC2_HISTORY = "/latest/meta-data/events/maintenance/history"


def act(api: httpx.Client, server_id: str, body: dict[str, Any], version: str = "2.111") -> None:
    r = api.post(f"/v2.1/servers/{server_id}/action", json=body, headers=mv(version))
    assert r.status_code == 202, r.text


def shown(api: httpx.Client, server_id: str) -> dict[str, Any]:
    r = api.get(f"/v2.1/servers/{server_id}", headers=V)
    assert r.status_code == 200, r.text
    server: dict[str, Any] = r.json()["server"]
    return server


def event_of(api: httpx.Client, server_id: str) -> dict[str, Any]:
    """The server's latest event, as the API shows it."""
    events = shown(api, server_id)["scheduled_events"]
    assert events, "no event"
    latest: dict[str, Any] = events[-1]
    return latest


def at(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def status_is(api: httpx.Client, server_id: str, status: str) -> Any:
    def check() -> dict[str, Any] | None:
        event = event_of(api, server_id)
        return event if event["status"] == status else None

    return wait_until(check, what=f"event {status}")


def acknowledge(md: httpx.Client, *ids: str) -> httpx.Response:
    return md.post(EVENTS, json={"acknowledge": list(ids)})


def another_operation_done(api: httpx.Client, cloud: Cloud) -> None:
    """A server booted and rebooted after the noticed operation was queued: the agent has
    looked for work since (claims go in queue order), so it passed the noticed one over."""
    other = boot(api, cloud)
    act(api, other.id, {"reboot": {"type": "SOFT"}})
    wait_for(api, other.id, "ACTIVE")


def test_a_notice_holds_the_reboot_until_the_guest_acknowledges_it(
    api: httpx.Client, cloud: Cloud, metadata_url: str, api_db: Database
) -> None:
    guest = boot(api, cloud)
    act(api, guest.id, {"reboot": {"type": "HARD", "notice_seconds": 600}})
    event = event_of(api, guest.id)
    assert event["type"] == "reboot" and event["status"] == "scheduled"
    assert event["notice_seconds"] == 600 and event["acknowledged_at"] is None
    another_operation_done(api, cloud)
    server = shown(api, guest.id)
    assert server["status"] == "HARD_REBOOT"
    assert server["scheduled_events"][-1]["status"] == "scheduled"
    with guest.client(metadata_url) as md:
        r = md.get(EVENTS)
        assert r.status_code == 200
        (seen,) = r.json()["events"]
        assert seen == {
            "id": event["id"],
            "type": "reboot",
            "not_before": event["not_before"][:19] + "Z",
            "status": "scheduled",
        }
        (ec2,) = md.get(EC2_SCHEDULED).json()
        assert ec2["Code"] == "instance-reboot" and ec2["EventId"] == event["id"]
        assert ec2["State"] == "active" and ec2["NotBefore"].endswith(" GMT")
        assert "events/" in md.get("/latest/meta-data/").text.split("\n")
        # A watcher long-polls; the acknowledgement wakes it.
        etag = r.headers["etag"]
        woken: list[httpx.Response] = []
        poll = threading.Thread(
            target=lambda: woken.append(
                md.get(EVENTS, params={"wait_for_change": "true", "last_etag": etag})
            )
        )
        poll.start()
        r = acknowledge(md, event["id"])
        assert r.status_code == 200, r.text
        assert r.json() == {"acknowledged": [event["id"]]}
        poll.join(timeout=15)
        assert woken and woken[0].json()["events"][0]["status"] != "scheduled"
    wait_for(api, guest.id, "ACTIVE")
    done = status_is(api, guest.id, "completed")
    # Started at once: well within a second of the acknowledgement, long before the notice.
    started = at(done["started_at"]) - at(done["acknowledged_at"])
    assert dt.timedelta(0) <= started < dt.timedelta(seconds=1), started
    assert at(done["started_at"]) < at(done["not_before"])
    # The instance action tells the story.
    actions = api.get(f"/v2.1/servers/{guest.id}/os-instance-actions", headers=V).json()
    request_id = actions["instanceActions"][0]["request_id"]
    action = api.get(
        f"/v2.1/servers/{guest.id}/os-instance-actions/{request_id}", headers=ADMIN
    ).json()["instanceAction"]
    names = [e["event"] for e in action["events"]]
    assert names == [
        "compute_reboot_instance",
        "cloudseed_notice_given",
        "cloudseed_notice_acknowledged",
    ]
    assert "600 s of notice" in action["events"][1]["details"]


def test_a_notice_that_runs_out_starts_the_operation(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    act(api, guest.id, {"os-stop": {"notice_seconds": 1}})
    wait_for(api, guest.id, "SHUTOFF")
    done = status_is(api, guest.id, "completed")
    assert done["acknowledged_at"] is None
    assert at(done["started_at"]) >= at(done["not_before"])
    with guest.client(metadata_url) as md:
        assert md.get(EC2_SCHEDULED).json() == []
        (ended,) = md.get(EC2_HISTORY).json()
        assert ended["State"] == "completed" and ended["Code"] == "instance-stop"
        assert ended["Description"].startswith("[Completed] ")
        assert md.get(EVENTS).json()["events"][0]["status"] == "completed"


def test_a_rebuild_with_a_notice_applies_when_acknowledged(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    r = api.post(
        f"/v2.1/servers/{guest.id}/action",
        json={"rebuild": {"imageRef": cloud.image2_id, "name": "renamed", "notice_seconds": 600}},
        headers=V,
    )
    assert r.status_code == 202, r.text
    assert r.json()["server"]["scheduled_events"][-1]["type"] == "rebuild"
    with guest.client(metadata_url) as md:
        # Until it runs, the guest is served what it has.
        assert md.get("/openstack/latest/meta_data.json").json()["name"] == "vm"
        (ec2,) = md.get(EC2_SCHEDULED).json()
        assert ec2["Code"] == "system-maintenance"
        assert acknowledge(md, ec2["EventId"]).json() == {"acknowledged": [ec2["EventId"]]}
    server = wait_for(api, guest.id, "ACTIVE")
    assert server["name"] == "renamed" and server["image"]["id"] == cloud.image2_id
    assert status_is(api, guest.id, "completed")["acknowledged_at"] is not None


def test_no_notice_below_2_111_nor_for_a_stopped_server(api: httpx.Client, cloud: Cloud) -> None:
    guest = boot(api, cloud)
    r = api.post(
        f"/v2.1/servers/{guest.id}/action",
        json={"reboot": {"type": "SOFT", "notice_seconds": 5}},
        headers=mv("2.110"),
    )
    assert r.status_code == 400 and "notice_seconds" in r.text
    assert (
        "scheduled_events"
        not in api.get(f"/v2.1/servers/{guest.id}", headers=mv("2.110")).json()["server"]
    )
    act(api, guest.id, {"os-stop": None})
    wait_for(api, guest.id, "SHUTOFF")
    # A stopped guest can read no notice: its rebuild runs at once.
    act(api, guest.id, {"rebuild": {"imageRef": cloud.image_id, "notice_seconds": 600}})
    wait_for(api, guest.id, "SHUTOFF")
    assert shown(api, guest.id)["scheduled_events"] == []


def test_a_delete_with_a_notice(
    api: httpx.Client, cloud: Cloud, metadata_url: str, api_db: Database
) -> None:
    guest = boot(api, cloud)
    r = api.delete(f"/v2.1/servers/{guest.id}", params={"notice_seconds": "600"}, headers=V)
    assert r.status_code == 204, r.text
    server = shown(api, guest.id)
    assert server["status"] == "ACTIVE" and server["OS-EXT-STS:task_state"] == "deleting"
    event = event_of(api, guest.id)
    assert event["type"] == "delete" and event["status"] == "scheduled"
    with guest.client(metadata_url) as md:
        (ec2,) = md.get(EC2_SCHEDULED).json()
        assert ec2["Code"] == "instance-retirement"
        # Other actions wait for the delete; the guest is still served.
        r = api.post(
            f"/v2.1/servers/{guest.id}/action", json={"reboot": {"type": "SOFT"}}, headers=V
        )
        assert r.status_code == 409, r.text
        assert acknowledge(md, event["id"]).json() == {"acknowledged": [event["id"]]}
        wait_until(lambda: api.get(f"/v2.1/servers/{guest.id}").status_code == 404, what="deleted")
        wait_until(lambda: md.get(EVENTS).status_code == 404, what="the guest unknown")
    # Its address is free again: the next server gets it.
    assert boot(api, cloud).address == guest.address


def test_a_plain_delete_overrides_a_pending_notice(api: httpx.Client, cloud: Cloud) -> None:
    guest = boot(api, cloud)
    act(api, guest.id, {"reboot": {"type": "SOFT", "notice_seconds": 600}})
    r = api.delete(f"/v2.1/servers/{guest.id}", headers=V)
    assert r.status_code == 204, r.text
    assert api.get(f"/v2.1/servers/{guest.id}").status_code == 404


def test_project_defaults(api: httpx.Client, cloud: Cloud) -> None:
    url = "/v2.1/os-lifecycle-notice-defaults/proj"
    unset = {"reboot": None, "stop": None, "rebuild": None, "delete": None}
    assert api.get(url, headers=V).json() == {"lifecycle_notices": unset}
    assert api.get(url, headers=mv("2.110")).status_code == 404
    r = api.put(url, json={"lifecycle_notices": {"reboot": 600}}, headers=V)
    assert r.status_code == 403, r.text
    r = api.put(url, json={"lifecycle_notices": {"reboot": 600, "stop": 0}}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json() == {"lifecycle_notices": {**unset, "reboot": 600}}
    assert api.get(url, headers=V).json() == {"lifecycle_notices": {**unset, "reboot": 600}}
    guest = boot(api, cloud)
    # At any microversion: a client that knows nothing of notices gives one.
    act(api, guest.id, {"reboot": {"type": "SOFT"}}, version="2.1")
    event = event_of(api, guest.id)
    assert event["notice_seconds"] == 600 and event["status"] == "scheduled"
    api.delete(f"/v2.1/servers/{guest.id}", headers=V)
    # From 2.111 a request may ask for none.
    other = boot(api, cloud)
    act(api, other.id, {"reboot": {"type": "SOFT", "notice_seconds": 0}})
    wait_for(api, other.id, "ACTIVE")
    assert shown(api, other.id)["scheduled_events"] == []
    r = api.put(url, json={"lifecycle_notices": {}}, headers=ADMIN)
    assert r.json() == {"lifecycle_notices": unset}


BAD: list[tuple[str, str, Any, list[tuple[str, str]] | None]] = [
    ("POST", "action", {"reboot": {"type": "SOFT", "notice_seconds": -1}}, None),
    ("POST", "action", {"reboot": {"type": "SOFT", "notice_seconds": 86401}}, None),
    ("POST", "action", {"reboot": {"type": "SOFT", "notice_seconds": "60"}}, None),
    ("POST", "action", {"reboot": {"type": "SOFT", "notice_seconds": 1.5}}, None),
    ("POST", "action", {"reboot": {"type": "SOFT", "notice_seconds": True}}, None),
    ("POST", "action", {"os-stop": {"notice_seconds": None}}, None),
    ("POST", "action", {"rebuild": {"imageRef": "IMAGE", "notice_seconds": 10**400}}, None),
    (
        "POST",
        "action",
        b'{"reboot": {"type": "SOFT", "notice_seconds": 1' + b"0" * 5000 + b"}}",
        None,
    ),
    ("DELETE", "", None, [("notice_seconds", "abc")]),
    ("DELETE", "", None, [("notice_seconds", "-5")]),
    ("DELETE", "", None, [("notice_seconds", "9" * 5000)]),
    ("DELETE", "", None, [("notice_seconds", "1"), ("notice_seconds", "2")]),
    ("PUT", "defaults", {"lifecycle_notices": {"reboot": 86401}}, None),
    ("PUT", "defaults", {"lifecycle_notices": {"resize": 5}}, None),
    ("PUT", "defaults", {"lifecycle_notices": {"reboot": "5"}}, None),
]


def test_bad_notices_are_400_and_change_nothing(
    api: httpx.Client, cloud: Cloud, cell_db: Database, api_db: Database
) -> None:
    guest = boot(api, cloud)
    before = snapshot(api_db, cell_db)
    for method, path, body, params in BAD:
        if path == "defaults":
            url = "/v2.1/os-lifecycle-notice-defaults/proj"
        else:
            url = f"/v2.1/servers/{guest.id}" + (f"/{path}" if path else "")
        if isinstance(body, dict) and "rebuild" in body:
            body = {"rebuild": {**body["rebuild"], "imageRef": cloud.image_id}}
        content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        r = api.request(
            method,
            url,
            content=content,
            params=tuple(params) if params else None,
            headers={**ADMIN, "Content-Type": "application/json"},
        )
        assert r.status_code == 400, (method, path, str(body)[:80], params, r.text)
        assert "badRequest" in r.json()
    assert changes(before, snapshot(api_db, cell_db)) == []


def test_a_guest_acknowledges_only_its_own_events(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cell_db: Database, api_db: Database
) -> None:
    owner, other = boot(api, cloud), boot(api, cloud)
    act(api, owner.id, {"reboot": {"type": "SOFT", "notice_seconds": 600}})
    event = event_of(api, owner.id)
    before = snapshot(api_db, cell_db)
    with other.client(metadata_url) as md:
        # Another server's event is as unknown as one never issued.
        assert acknowledge(md, event["id"]).json() == {"acknowledged": []}
        assert acknowledge(md, "0" * 36).json() == {"acknowledged": []}
        for bad, status in (
            (b"{", 400),
            (b'{"acknowledge": []}', 400),
            (b'{"acknowledge": "x"}', 400),
            (b'{"acknowledge": ["a\\u0000"]}', 400),
            (b'{"acknowledge": ["\\ud800"]}', 400),
            (b'{"acknowledge": [1]}', 400),
            (b'{"acknowledge": ["a"], "more": 1}', 400),
            (b"\xff\xfe", 400),
            (b'{"acknowledge": ["' + b"a" * 5000 + b'"]}', 413),
        ):
            r = md.post(EVENTS, content=bad)
            assert r.status_code == status, (bad[:40], r.text)
            assert event["id"] not in r.text
        assert md.put(EVENTS, content=b"{}").status_code == 405
    assert changes(before, snapshot(api_db, cell_db)) == []
    assert event_of(api, owner.id)["status"] == "scheduled"
    with owner.client(metadata_url) as md:
        first = acknowledge(md, event["id"], event["id"])
        assert first.json() == {"acknowledged": [event["id"]]}
        wait_for(api, owner.id, "ACTIVE")
        status_is(api, owner.id, "completed")
        # A replay is harmless: the same answer, nothing written.
        settled = snapshot(api_db, cell_db)
        assert acknowledge(md, event["id"]).json() == {"acknowledged": [event["id"]]}
        assert changes(settled, snapshot(api_db, cell_db)) == []


def test_a_deleted_servers_guest_acknowledges_nothing(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    act(api, guest.id, {"reboot": {"type": "SOFT", "notice_seconds": 600}})
    event = event_of(api, guest.id)
    assert api.delete(f"/v2.1/servers/{guest.id}", headers=V).status_code == 204
    with guest.client(metadata_url) as md:
        assert acknowledge(md, event["id"]).status_code == 404


def test_a_watcher_long_polling_before_the_notice_is_woken_by_it(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    # The e2e guest's watcher polls from its first boot on, long before any notice: the
    # notice itself, written by the compute API, must end its wait, not its timeout.
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        r = md.get(EVENTS)
        assert r.status_code == 200 and r.json()["events"] == []
        etag = r.headers["etag"]
        woken: list[tuple[float, httpx.Response]] = []

        def watch() -> None:
            started = time.monotonic()
            answer = md.get(
                EVENTS, params={"wait_for_change": "true", "last_etag": etag, "timeout_sec": "30"}
            )
            woken.append((time.monotonic() - started, answer))

        poll = threading.Thread(target=watch)
        poll.start()
        time.sleep(0.5)  # the poll is waiting
        act(api, guest.id, {"reboot": {"type": "HARD", "notice_seconds": 600}})
        poll.join(timeout=40)
        assert woken, "the long-poll never returned"
        waited, answer = woken[0]
        assert [e["status"] for e in answer.json()["events"]] == ["scheduled"]
        assert waited < 10, f"woken after {waited:.1f} s: by its timeout, not the notice"
        assert acknowledge(md, answer.json()["events"][0]["id"]).status_code == 200
    wait_for(api, guest.id, "ACTIVE")
