"""Readiness (2.110) end to end, short of a guest: cloud-init's webhook events posted to a real
metadata listener exactly as cloud-init posts them (one JSON object, no Content-Type), the
status in the server view and the events in ``GET /servers/{id}/boot-report``; the guest
reports only its own boot; replays, late, huge and malformed events; phone_home and reboots as
signals; the vendordata part for servers that opt in."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.servers.models import Instance, InstanceSystemMetadata
from cloudseed.servers.readiness import store
from cloudseed.servers.readiness.events import parse_event
from cloudseed.servers.readiness.models import BootReportEvent
from cloudseed.signing import sign
from cloudseed.vendordata import boot_report
from tests.support.cli import run
from tests.support.cloud import Cloud, mv, wait_for
from tests.support.guests import SECRET, Guest, MetadataServer, boot
from tests.support.host_keys import PHONE_HOME, cloud_init_form, host_key_set, post
from tests.support.snapshot import changes, snapshot

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

REPORT = "/openstack/latest/boot_report"
AS_CLOUD_INIT = {"User-Agent": "Cloud-Init/22.4.2"}
MALLORY = {"X-Auth-Token": "mallory:other"}
NEUTRON = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})


def event(name: str, event_type: str = "finish", result: str = "SUCCESS", at: float = 0.0) -> str:
    """One event as cloud-init's WebHookHandler sends it: ``json.dumps(event.as_dict())``."""
    fields: dict[str, Any] = {
        "name": name,
        "description": f"running {name.rsplit('/', 1)[-1]} with frequency once-per-instance",
        "event_type": event_type,
        "origin": "cloudinit",
        "timestamp": at or time.time(),
    }
    if event_type == "finish":
        fields["result"] = result
    return json.dumps(fields)


def send(md: httpx.Client, body: str | bytes, **headers: str) -> httpx.Response:
    return md.post(REPORT, content=body, headers={**AS_CLOUD_INIT, **headers})


def status_of(api: httpx.Client, server_id: str, **headers: str) -> dict[str, Any]:
    r = api.get(f"/v2.1/servers/{server_id}", headers={**mv("2.110"), **headers})
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()["server"]["bootstrap_status"]
    return found


def report_of(api: httpx.Client, server_id: str) -> dict[str, Any]:
    r = api.get(f"/v2.1/servers/{server_id}/boot-report", headers=mv("2.110"))
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()["boot_report"]
    return found


def kept(cell_db: Database, server_id: str) -> tuple[int, str | None]:
    """The events kept for the server, and its stored progress (None: none)."""
    with cell_db.read() as session:
        count = session.scalar(
            select(func.count(BootReportEvent.id)).where(BootReportEvent.instance_uuid == server_id)
        )
        stored = session.scalar(
            select(InstanceSystemMetadata.value).where(
                InstanceSystemMetadata.instance_uuid == server_id,
                InstanceSystemMetadata.key == store.PROGRESS_KEY,
            )
        )
    return count or 0, stored


def first_boot(md: httpx.Client, *, failing: str | None = None) -> None:
    """What a first boot posts once vendordata turned the webhook on (init-network on)."""
    t = time.time()
    steps = [
        event("init-network/config-ssh", "start", at=t),
        event("init-network/config-ssh", at=t + 0.1),
        event("init-network", at=t + 0.2),
        event("modules-config/config-runcmd", "start", at=t + 0.3),
        event("modules-config/config-runcmd", "finish", "FAIL" if failing else "SUCCESS", t + 0.4),
        event("modules-config", "finish", "FAIL" if failing else "SUCCESS", t + 0.5),
        event("modules-final", at=t + 0.6),
    ]
    for body in steps:
        r = send(md, body)
        assert (r.status_code, r.text) == (200, "accepted\n"), r.text


def test_a_boot_is_reported_and_shown(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud)
    assert status_of(api, guest.id) == {
        "status": "pending",
        "failed_module": None,
        "updated_at": None,
    }
    with guest.client(metadata_url) as md:
        assert send(md, event("init-network/config-ssh", "start")).text == "accepted\n"
        assert status_of(api, guest.id)["status"] == "running"
        first_boot(md)
    shown = status_of(api, guest.id)
    assert (shown["status"], shown["failed_module"]) == ("done", None)
    assert shown["updated_at"].endswith("Z")
    report = report_of(api, guest.id)
    assert (report["status"], report["source"], report["stage"], report["boot"]) == (
        "done",
        "webhook",
        "modules-final",
        1,
    )
    assert [(e["name"], e["event_type"], e["result"]) for e in report["events"][:3]] == [
        ("init-network/config-ssh", "start", None),
        ("init-network/config-ssh", "start", None),
        ("init-network/config-ssh", "finish", "SUCCESS"),
    ]
    assert report["events"][-1]["name"] == "modules-final" and report["events_dropped"] == 0
    # Below 2.110 neither exists; another project's server is not found.
    old = api.get(f"/v2.1/servers/{guest.id}", headers=mv("2.109")).json()["server"]
    assert "bootstrap_status" not in old
    assert api.get(f"/v2.1/servers/{guest.id}/boot-report", headers=mv("2.109")).status_code == 404
    r = api.get(f"/v2.1/servers/{guest.id}/boot-report", headers={**mv("2.110"), **MALLORY})
    assert r.status_code == 404
    listed = api.get("/v2.1/servers/detail", headers=mv("2.110")).json()["servers"]
    assert {s["id"]: s["bootstrap_status"]["status"] for s in listed}[guest.id] == "done"


def test_a_failed_module_is_named(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        first_boot(md, failing="runcmd")
    assert status_of(api, guest.id)["status"] == "failed"
    assert status_of(api, guest.id)["failed_module"] == "runcmd"


def test_a_guest_reports_its_own_boot_only(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    metadata_server: MetadataServer,
    cell_db: Database,
) -> None:
    guest, other = boot(api, cloud), boot(api, cloud)
    # Nothing in the body names a server: whoever posts reports for itself.
    spoofed = json.dumps({**json.loads(event("modules-final")), "instance_id": other.id})
    with guest.client(metadata_url) as md:
        assert send(md, spoofed).text == "accepted\n"
    assert status_of(api, guest.id)["status"] == "done"
    assert (
        status_of(api, other.id)["status"] == "pending" and report_of(api, other.id)["events"] == []
    )
    # An address that is no server's, and a deleted server's: not found, nothing kept.
    stranger = Guest("none", "127.0.0.250", "")
    with stranger.client(metadata_url) as md:
        assert send(md, event("modules-final")).status_code == 404
    r = api.delete(f"/v2.1/servers/{other.id}")
    assert r.status_code == 204
    with other.client(metadata_url) as md:
        assert send(md, event("modules-final")).status_code == 404
    assert kept(cell_db, other.id) == (0, None)
    # Behind a metadata proxy, only a correctly signed header names the caller.
    third = boot(api, cloud)
    signed = {
        "X-Instance-ID": third.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, third.id),
    }
    with metadata_server(NEUTRON) as url, httpx.Client(base_url=url, timeout=10) as md:
        forged = {**signed, "X-Instance-ID-Signature": sign("wrong", third.id)}
        assert send(md, event("modules-final"), **forged).status_code == 403
        assert status_of(api, third.id)["status"] == "pending"
        assert send(md, event("modules-final"), **signed).text == "accepted\n"
    assert status_of(api, third.id)["status"] == "done"


def test_tokens_apply_as_to_every_document(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud)
    with (
        metadata_server(("metadata", {"require_token": True})) as url,
        guest.client(url) as md,
    ):
        assert send(md, event("modules-final")).status_code == 401  # cloud-init sends none
        assert status_of(api, guest.id)["status"] == "pending"
        ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        token = md.put("/latest/api/token", headers=ttl).text
        r = send(md, event("modules-final"), **{"X-aws-ec2-metadata-token": token})
        assert r.text == "accepted\n"


def test_replays_and_late_events_change_nothing(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cell_db: Database
) -> None:
    guest = boot(api, cloud)
    t = time.time()
    with guest.client(metadata_url) as md:
        ssh = event("init-network/config-ssh", at=t)
        assert send(md, ssh).text == "accepted\n"
        assert send(md, event("modules-final", at=t + 2)).text == "accepted\n"
        before = snapshot(cell_db)
        assert send(md, ssh).text == "repeat\n"  # cloud-init's retry of a lost answer
        assert send(md, event("init-network", at=t + 1)).text == "stale\n"  # out of order
        assert send(md, event("modules-final", "finish", "FAIL", t + 1.5)).text == "stale\n"
        assert changes(before, snapshot(cell_db)) == []
        # Newer than everything: the guest booted again by itself (a reboot inside it).
        assert send(md, event("init-local/check-cache", at=t + 60)).text == "accepted\n"
    report = report_of(api, guest.id)
    assert (report["boot"], report["status"], len(report["events"])) == (2, "running", 1)


def test_a_reboot_through_the_api_waits_for_the_new_boot(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        first_boot(md)
        r = api.post(f"/v2.1/servers/{guest.id}/action", json={"reboot": {"type": "SOFT"}})
        assert r.status_code == 202
        wait_for(api, guest.id, "ACTIVE")
        assert status_of(api, guest.id)["status"] == "pending"
        assert report_of(api, guest.id)["boot"] == 2
        assert send(md, event("init-local", at=time.time() + 1)).text == "accepted\n"
    assert status_of(api, guest.id)["status"] == "running"


def test_phone_home_counts_when_no_webhook_tells_more(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    quiet, chatty = boot(api, cloud), boot(api, cloud)
    with quiet.client(metadata_url) as md:
        assert post(md, cloud_init_form(quiet.id, host_key_set())).text == "accepted\n"
    assert report_of(api, quiet.id)["status"] == "done"
    assert report_of(api, quiet.id)["source"] == "phone_home"
    with chatty.client(metadata_url) as md:
        assert send(md, event("init-network/config-ssh", "start")).text == "accepted\n"
        assert md.post(PHONE_HOME, content=b"").status_code == 400  # refused: no signal
        assert post(md, cloud_init_form(chatty.id, host_key_set())).text == "accepted\n"
    report = report_of(api, chatty.id)
    assert (report["status"], report["source"]) == ("running", "webhook")
    assert report["phone_home_at"] is not None


def test_a_build_or_rebuild_not_finished_is_told_to_come_back(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cell_db: Database
) -> None:
    guest = boot(api, cloud)
    for values, why in (
        ({"task_state": "rebuilding"}, "is being rebuilt"),
        ({"launched_at": None, "task_state": None}, "has not finished building"),
    ):
        statement = update(Instance).where(Instance.uuid == guest.id).values(**values)

        def work(session: Session, statement: Any = statement) -> None:
            session.execute(statement)

        cell_db.run(work, write=True)
        with guest.client(metadata_url) as md:
            r = send(md, event("modules-final"))
        assert r.status_code == 409 and why in r.text
        assert status_of(api, guest.id)["status"] == "pending"
    assert report_of(api, guest.id)["events"] == []


HOSTILE: list[tuple[str, bytes, int, str]] = [
    ("not-json", b"name=modules-final", 400, "not JSON"),
    ("not-utf8", b'{"name": "\xff"}', 400, "not UTF-8"),
    ("not-object", b'["modules-final"]', 400, "not a JSON object"),
    ("lone-surrogate", event("x").replace('"x"', '"\\ud800"').encode(), 400, "surrogate"),
    ("nul", event("x").replace('"x"', '"a\\u0000b"').encode(), 400, "NUL"),
    ("no-result", event("x").replace('"result"', '"r"').encode(), 400, "no result"),
    (
        "huge-number",
        event("x").replace('"timestamp": ', '"timestamp": 1e999, "t": ').encode(),
        400,
        "1970",
    ),
    ("digits", b'{"timestamp": ' + b"9" * 5000 + b"}", 400, "not JSON"),
    ("deep", b"[" * 8000 + b"]" * 8000, 400, "not JSON"),
    ("huge", json.dumps({"description": "x" * (1 << 20)}).encode(), 413, "too large"),
]


def test_hostile_events_are_refused_and_change_nothing(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cell_db: Database
) -> None:
    guest = boot(api, cloud)
    before = snapshot(cell_db)
    for name, body, status, why in HOSTILE:
        with guest.client(metadata_url) as md:  # a new connection: a 413 closes its own
            r = send(md, body)
            assert (r.status_code, why in r.text) == (status, True), (name, r.text)
            if status == 413:
                assert r.headers["connection"] == "close"
    with guest.client(metadata_url) as md:  # the service is fine afterwards
        assert md.get(REPORT).status_code == 405
        assert md.get("/openstack/2018-08-27/boot_report").status_code == 404
    assert changes(before, snapshot(cell_db)) == []


def test_concurrent_events_of_one_guest_are_all_taken(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    t = time.time()
    bodies = [event(f"modules-config/config-m{i}", at=t + i) for i in range(16)]

    def post_one(body: str) -> tuple[int, str]:
        with guest.client(metadata_url) as md:
            r = send(md, body)
            return r.status_code, r.text

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(post_one, bodies))
    assert set(answers) == {(200, "accepted\n")}
    report = report_of(api, guest.id)
    assert len(report["events"]) == 16 and report["status"] == "running"


def test_the_events_kept_are_bounded(api: httpx.Client, cloud: Cloud, cell_db: Database) -> None:
    guest = boot(api, cloud)
    t = time.time()
    steps = [
        parse_event(event(f"modules-config/config-m{i}", at=t + i).encode()) for i in range(300)
    ]

    def work(session: Any) -> list[str]:
        return [store.record_event(session, guest.id, e, utcnow()) for e in steps]

    assert set(cell_db.run(work, write=True)) == {"accepted"}
    report = report_of(api, guest.id)
    assert (len(report["events"]), report["events_dropped"]) == (store.MAX_EVENTS, 44)
    assert report["stage"] == "modules-config" and report["status"] == "running"


def test_vendordata_turns_the_webhook_on_for_servers_that_opt_in(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    opted = boot(api, cloud, metadata={boot_report.METADATA_ITEM: "true"})
    plain = boot(api, cloud)
    url = "http://169.254.169.254/openstack/latest/boot_report"
    part = boot_report.cloud_config(url)
    for scope, wanted in (("opt-in", {opted.id}), ("all", {opted.id, plain.id}), ("never", set())):
        with metadata_server(("metadata", {"boot_report_webhook": scope})) as base:
            for guest in (opted, plain):
                with guest.client(base) as md:
                    vendor = md.get("/openstack/latest/vendor_data.json").json()
                    vendor2 = md.get("/openstack/latest/vendor_data2.json").json()
                assert vendor == ({"cloud-init": [part]} if guest.id in wanted else {}), scope
                assert "cloud-init" not in vendor2  # once is enough: 22.4 applies both
    assert 'endpoint: "http://169.254.169.254/openstack/latest/boot_report"' in part


def test_cloudseed_server_wait(
    api: httpx.Client, cloud: Cloud, metadata_url: str, database_url: str, tmp_path: Path
) -> None:
    done, failed, pending = boot(api, cloud), boot(api, cloud), boot(api, cloud)
    with done.client(metadata_url) as md:
        first_boot(md)
    with failed.client(metadata_url) as md:
        first_boot(md, failing="runcmd")
    env = {
        "CLOUDSEED_API_DATABASE__CONNECTION": database_url,
        "CLOUDSEED_DATABASE__CONNECTION": database_url,
        "CLOUDSEED_STATE_PATH": str(tmp_path),
    }
    assert run("server", "wait", done.id, env=env) == (0, f"Server {done.id} is ready.\n")
    code, out = run("server", "wait", failed.id, env=env)
    assert (code, "module 'runcmd' failed" in out) == (1, True), out
    started = time.monotonic()
    code, out = run("server", "wait", pending.id, "--timeout", "0.2", "--interval", "0.05", env=env)
    assert (code, "its boot is pending" in out) == (2, True), out
    assert time.monotonic() - started < 10
    assert run("server", "wait", "no-such-server", env=env)[0] == 1
