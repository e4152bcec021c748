"""The issue's end-to-end scenarios, against a running cloudseed with the qemu driver and a
stock Debian cloud-init guest. Guests boot one at a time (two cores: a second TCG guest halves
both). Each assertion is made from outside the guest, on the markers its user data script
writes to the serial console, read through ``os-getConsoleOutput``. The first guest opts in to
readiness's webhook (2.110): its boot reaches ``done`` in the API, and its rebuild, given a
broken cloud-config module, ``failed`` naming it."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.e2e.guest_scripts import ack_watcher_user_data, key_hash, per_boot_user_data, user_data
from tests.e2e.harness import E2ECloud, deleted_afterwards
from tests.e2e.readiness import BROKEN_MODULE, OPT_IN, settled_status, with_broken_module

ROOT_KEYS = "file=/root/.ssh/authorized_keys"
NOTICE = 600  # seconds of notice the hard reboot of scenario 4 gives (2.111)
USER_KEYS = "file=/home/debian/.ssh/authorized_keys"
PASSWORD = "e2e-encrypted-password-blob"


@pytest.fixture(scope="module")
def first_boot(e2e_cloud, keypairs, timings):
    cloud, ids = e2e_cloud
    boot = cloud.boot(ids, run="first", key_name="key1", password=PASSWORD, metadata=OPT_IN)
    timings["1 metadata service boot"] = {
        "request_to_user_data_done_s": round(boot.seconds, 1),
        "guest_uptime_s": boot.guest_uptime,
    }
    return boot


def key_of(cloud: E2ECloud, name: str) -> str:
    r = cloud.client.get(f"/v2.1/os-keypairs/{name}")
    assert r.status_code == 200, r.text
    return str(r.json()["keypair"]["public_key"])


def test_1_boot_from_the_metadata_service(e2e_cloud, first_boot):
    cloud, _ = e2e_cloud
    found = first_boot.markers
    assert found.of("BEGIN") == [f"iid={first_boot.server_id}"]
    # The HTTP datasource, found in cloud-init's local stage (no config drive attached).
    assert found.of("DATASOURCE") == ["DataSourceOpenStackLocal"]
    wanted = key_hash(key_of(cloud, "key1"))
    assert sorted(found.of("KEY")) == sorted(
        [f"{ROOT_KEYS} hash={wanted}", f"{USER_KEYS} hash={wanted}"]
    )
    console = cloud.console(first_boot.server_id)
    assert "E2E VENDOR run=vendor from-dynamic-target" in console
    # cloud-init's webhook, which vendordata turned on, says the boot is done; `cloudseed
    # server wait` agrees (exit 0).
    assert settled_status(cloud, first_boot.server_id)["status"] == "done"
    assert "is ready" in cloud.cli("server", "wait", first_boot.server_id, "--timeout", "0")


def test_5_the_guest_posts_its_password(e2e_cloud, first_boot):
    cloud, _ = e2e_cloud
    assert first_boot.markers.of("PASSWORD") == ["posted"]
    r = cloud.client.get(f"/v2.1/servers/{first_boot.server_id}/os-server-password")
    assert r.status_code == 200, r.text
    assert r.json() == {"password": PASSWORD}


def test_3_rebuild_with_another_key_pair(e2e_cloud, first_boot, timings):
    cloud, ids = e2e_cloud
    script = with_broken_module(user_data("rebuilt"))
    rebuilt = cloud.rebuild(first_boot, ids, run="rebuilt", key_name="key2", script=script)
    timings["3 rebuild"] = {
        "request_to_user_data_done_s": round(rebuilt.seconds, 1),
        "guest_uptime_s": rebuilt.guest_uptime,
    }
    new, old = key_hash(key_of(cloud, "key2")), key_hash(key_of(cloud, "key1"))
    assert rebuilt.markers.of("BEGIN") == [f"iid={first_boot.server_id}"]
    assert sorted(rebuilt.markers.of("KEY")) == sorted(
        [f"{ROOT_KEYS} hash={new}", f"{USER_KEYS} hash={new}"]
    )
    assert old not in " ".join(rebuilt.markers.of("KEY"))
    # The new disk's boot, reported afresh: failed, naming the broken module.
    status = settled_status(cloud, first_boot.server_id)
    assert (status["status"], status["failed_module"]) == ("failed", BROKEN_MODULE)


def test_delete_leaves_no_guest_running(e2e_cloud, first_boot):
    cloud, _ = e2e_cloud
    cloud.delete(first_boot.server_id)
    assert cloud.leftover_qemus() == []


def test_4_changed_user_data_reaches_the_guest_after_a_reboot(e2e_cloud, first_boot, timings):
    # After the other scenarios' guest is gone: one guest at a time.
    # The guest runs a watcher of its lifecycle notices (2.111): the reboot is given a long
    # notice, which the watcher acknowledges, so it starts long before the notice ends.
    cloud, ids = e2e_cloud
    boot = cloud.boot(ids, run="ud-v1", key_name="key1", script=ack_watcher_user_data("ud-v1"))
    with deleted_afterwards(cloud) as servers:  # a leftover would hold the next guest's address
        servers.append(boot.server_id)
        _changed_user_data_after_an_acknowledged_reboot(cloud, boot, timings)


def _changed_user_data_after_an_acknowledged_reboot(cloud, boot, timings):
    timings["4 boot with per-boot user data"] = {
        "request_to_bootcmd_s": round(boot.seconds, 1),
        "guest_uptime_s": boot.guest_uptime,
    }
    rebooted = cloud.update_user_data_and_reboot(
        boot, run="ud-v2", script=per_boot_user_data("ud-v2"), notice_seconds=NOTICE
    )
    timings["4 hard reboot after a user data update"] = {
        "request_to_bootcmd_s": round(rebooted.seconds, 1),
        "guest_uptime_s": rebooted.guest_uptime,
    }
    # The guest re-read its data at boot (the image asks for that) and ran the new bootcmd.
    console = cloud.console(boot.server_id)
    assert console.count("E2E END run=ud-v2") == 1
    assert console.count("E2E END run=ud-v1") == 1  # not again after the update
    # The watcher saw the notice and acknowledged it; the reboot started long before the end.
    r = cloud.client.get(
        f"/v2.1/servers/{boot.server_id}", headers={"OpenStack-API-Version": "compute 2.111"}
    )
    (event,) = r.json()["server"]["scheduled_events"]
    assert event["type"] == "reboot" and event["status"] == "completed", event
    # The watcher writes its NOTICE line before it acknowledges. Its ACK line comes after the
    # answer, and may never be written: the hard reboot starts within milliseconds of the
    # acknowledgement (ack_to_start_s below), and a guest under TCG can be stopped before it
    # has read the answer. The acknowledgement itself is the API's acknowledged_at, and only
    # the guest (through the metadata service) can make it.
    assert f"E2E NOTICE run=watcher type=reboot id={event['id']}" in console
    assert event["acknowledged_at"] is not None, event

    def at(text: str) -> dt.datetime:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")

    early = at(event["not_before"]) - at(event["started_at"])
    timings["4 hard reboot with 600 s of notice, acknowledged"] = {
        "started_before_the_notice_ended_s": round(early.total_seconds(), 1),
        "ack_to_start_s": round(
            (at(event["started_at"]) - at(event["acknowledged_at"])).total_seconds(), 3
        ),
        # What the watcher wrote (its errors too): how long it took to see the notice.
        "watcher_lines": [line for line in console.splitlines() if "run=watcher" in line],
    }
    assert early > dt.timedelta(seconds=NOTICE / 2), event
