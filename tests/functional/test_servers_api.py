"""Servers over real HTTP on every backend: create, key pair snapshots, user data updates,
rebuild, reboot, conflicts, failures, history."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.images import service as images
from cloudseed.networks import service as networks
from tests.support.cloud import b64, create_server, make_cloud, mv, wait_for
from tests.support.snapshot import changes, snapshot
from tests.support.waiting import wait_until

ADMIN = {"X-Auth-Token": "admin:proj"}


def admin_show(api, server_id, version="2.105"):
    r = api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv(version)})
    assert r.status_code == 200, r.text
    return r.json()["server"]


def admin_list(api, reservation_id, version="2.3"):
    r = api.get(
        "/v2.1/servers/detail",
        params={"reservation_id": reservation_id},
        headers={**ADMIN, **mv(version)},
    )
    assert r.status_code == 200, r.text
    return r.json()["servers"]


def history(api, server_id):
    r = api.get(f"/v2.1/servers/{server_id}/bootstrap-history", headers=ADMIN)
    assert r.status_code == 200, r.text
    return r.json()["bootstrap_history"]


class TestCreate:
    def test_create_with_key_and_user_data(self, api, cloud):
        created = create_server(
            api,
            cloud,
            key_name="key1",
            user_data=b64("#!/bin/sh\necho hi"),
            metadata={"role": "web"},
        )
        assert created["adminPass"] and created["links"][0]["rel"] == "self"
        server = wait_for(api, created["id"], "ACTIVE")
        assert server["key_name"] == "key1"
        assert server["metadata"] == {"role": "web"}
        assert server["addresses"]["private"][0]["addr"] == "10.0.0.3"
        assert server["addresses"]["private"][0]["OS-EXT-IPS-MAC:mac_addr"].startswith("fa:16:3e:")
        assert server["OS-SRV-USG:launched_at"] is not None
        assert "OS-EXT-SRV-ATTR:user_data" not in server  # not for non-admins
        shown = admin_show(api, created["id"], "2.3")
        assert shown["OS-EXT-SRV-ATTR:user_data"] == b64("#!/bin/sh\necho hi")
        assert shown["OS-EXT-SRV-ATTR:hostname"] == "vm"

    def test_list_filtered_by_reservation(self, api, cloud):
        body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1"}
        r = api.post(
            "/v2.1/servers",
            json={"server": {**body, "min_count": 2, "return_reservation_id": True}},
        )
        assert r.status_code == 202, r.text
        reservation = r.json()["reservation_id"]
        assert reservation.startswith("r-")
        other = create_server(api, cloud)
        listed = api.get("/v2.1/servers/detail", params={"reservation_id": reservation})
        servers = listed.json()["servers"]
        assert sorted(s["name"] for s in servers) == ["vm-1", "vm-2"]
        assert {s["OS-EXT-SRV-ATTR:reservation_id"] for s in admin_list(api, reservation)} == {
            reservation
        }
        assert api.get("/v2.1/servers", params={"reservation_id": "r-none"}).json() == {
            "servers": []
        }
        for server_id in [other["id"], *(s["id"] for s in servers)]:
            wait_for(api, server_id, "ACTIVE")

    def test_invalid_key_name(self, api, cloud):
        r = api.post(
            "/v2.1/servers",
            json={
                "server": {
                    "name": "vm",
                    "imageRef": cloud.image_id,
                    "flavorRef": "1",
                    "key_name": "nope",
                }
            },
        )
        assert r.status_code == 400
        assert r.json() == {"badRequest": {"code": 400, "message": "Invalid key_name provided."}}
        assert api.get("/v2.1/servers").json()["servers"] == []

    @pytest.mark.parametrize("user_data", ["not base64!!=", "A" * 65536])
    def test_invalid_user_data(self, api, cloud, user_data):
        r = api.post(
            "/v2.1/servers",
            json={
                "server": {
                    "name": "vm",
                    "imageRef": cloud.image_id,
                    "flavorRef": "1",
                    "user_data": user_data,
                }
            },
        )
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"].startswith(
            "Invalid input for field/attribute user_data."
        )

    def test_key_pair_deleted_later_changes_nothing(self, api, cloud):
        server_id = create_server(api, cloud, key_name="key1")["id"]
        wait_for(api, server_id, "ACTIVE")
        assert api.delete("/v2.1/os-keypairs/key1").status_code == 202
        assert wait_for(api, server_id, "ACTIVE")["key_name"] == "key1"
        assert history(api, server_id)[0]["new"]["name"] == "key1"

    def test_networks_required_from_2_37(self, api, cloud):
        r = api.post(
            "/v2.1/servers",
            headers=mv("2.37"),
            json={"server": {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1"}},
        )
        assert r.status_code == 400
        server_id = create_server(api, cloud, "2.37", networks="none")["id"]
        assert wait_for(api, server_id, "ACTIVE")["addresses"] == {}

    def test_block_device_mapping_image_to_local_only(self, api, cloud):
        image_bdm = {
            "uuid": cloud.image2_id,
            "boot_index": 0,
            "source_type": "image",
            "destination_type": "local",
            "delete_on_termination": True,
        }
        r = api.post(
            "/v2.1/servers",
            json={
                "server": {"name": "vm", "flavorRef": "1", "block_device_mapping_v2": [image_bdm]}
            },
        )
        assert r.status_code == 202, r.text
        server = wait_for(api, r.json()["server"]["id"], "ACTIVE")
        assert server["image"]["id"] == cloud.image2_id
        volume_bdm = {**image_bdm, "source_type": "volume", "destination_type": "volume"}
        r = api.post(
            "/v2.1/servers",
            json={
                "server": {
                    "name": "vm",
                    "flavorRef": "1",
                    "imageRef": cloud.image_id,
                    "block_device_mapping_v2": [volume_bdm],
                }
            },
        )
        assert r.status_code == 400
        assert "no volume service" in r.json()["badRequest"]["message"]

    def test_build_failure_is_recorded(self, api, cloud, fake_driver):
        fake_driver.fail("spawn", message="no valid host")
        server_id = create_server(api, cloud)["id"]
        server = wait_for(api, server_id, "ERROR")
        assert server["fault"]["message"] == "spawn failed: no valid host"
        assert server["fault"]["code"] == 500


class TestRebuild:
    def rebuild(self, api, server_id, version, **fields):
        return api.post(
            f"/v2.1/servers/{server_id}/action",
            headers=mv(version),
            json={"rebuild": {"imageRef": fields.pop("image"), **fields}},
        )

    def test_access_ips(self, api, cloud):
        """Nova's rebuild sets accessIPv4/accessIPv6 (here when the rebuild succeeds)."""
        server_id = create_server(api, cloud, accessIPv4="192.0.2.1")["id"]
        wait_for(api, server_id, "ACTIVE")
        r = self.rebuild(api, server_id, "2.1", image=cloud.image_id, accessIPv6="2001:db8:0:0::7")
        assert r.status_code == 202, r.text
        shown = r.json()["server"]
        assert (shown["accessIPv4"], shown["accessIPv6"]) == ("192.0.2.1", "2001:db8::7")
        server = wait_for(api, server_id, "ACTIVE")
        assert (server["accessIPv4"], server["accessIPv6"]) == ("192.0.2.1", "2001:db8::7")
        r = self.rebuild(api, server_id, "2.1", image=cloud.image_id, accessIPv4="198.51.100.9")
        assert r.status_code == 202, r.text
        server = wait_for(api, server_id, "ACTIVE")
        assert (server["accessIPv4"], server["accessIPv6"]) == ("198.51.100.9", "2001:db8::7")

    def test_key_name_replaced_removed_or_kept(self, api, cloud):
        server_id = create_server(api, cloud, key_name="key1")["id"]
        wait_for(api, server_id, "ACTIVE")
        r = self.rebuild(api, server_id, "2.54", image=cloud.image2_id, key_name="key2")
        assert r.status_code == 202, r.text
        assert r.json()["server"]["key_name"] == "key2"
        server = wait_for(api, server_id, "ACTIVE", version="2.54")
        assert server["image"]["id"] == cloud.image2_id and server["key_name"] == "key2"
        assert self.rebuild(api, server_id, "2.54", image=cloud.image_id).status_code == 202
        assert wait_for(api, server_id, "ACTIVE")["key_name"] == "key2"  # absent: kept
        assert (
            self.rebuild(api, server_id, "2.54", image=cloud.image_id, key_name=None).status_code
            == 202
        )
        assert wait_for(api, server_id, "ACTIVE")["key_name"] is None
        changes = [
            (c["field"], c["action"], (c["new"] or {}).get("name"))
            for c in history(api, server_id)
            if c["field"] == "key_pair"
        ]
        assert changes == [
            ("key_pair", "create", "key1"),
            ("key_pair", "rebuild", "key2"),
            ("key_pair", "rebuild", None),
        ]

    def test_key_name_needs_2_54_and_a_known_key(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        r = self.rebuild(api, server_id, "2.53", image=cloud.image_id, key_name="key2")
        assert r.status_code == 400
        r = self.rebuild(api, server_id, "2.54", image=cloud.image_id, key_name="nope")
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"] == "Invalid key_name provided."
        assert wait_for(api, server_id, "ACTIVE")["status"] == "ACTIVE"

    def test_user_data_replaced_and_cleared_from_2_57(self, api, cloud):
        server_id = create_server(api, cloud, user_data=b64("one"))["id"]
        wait_for(api, server_id, "ACTIVE")
        assert (
            self.rebuild(
                api, server_id, "2.56", image=cloud.image_id, user_data=b64("two")
            ).status_code
            == 400
        )
        r = self.rebuild(api, server_id, "2.57", image=cloud.image_id, user_data=b64("two"))
        assert r.status_code == 202 and r.json()["server"]["user_data"] == b64("two")
        wait_for(api, server_id, "ACTIVE")
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == b64("two")
        self.rebuild(api, server_id, "2.57", image=cloud.image_id, user_data=None)
        wait_for(api, server_id, "ACTIVE")
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] is None

    def test_failed_rebuild_keeps_key_and_snapshot_consistent(
        self, api, cloud, fake_driver, cell_db
    ):
        server_id = create_server(api, cloud, key_name="key1")["id"]
        wait_for(api, server_id, "ACTIVE")
        fake_driver.fail("rebuild", uuid=server_id, message="disk gone")
        assert (
            self.rebuild(api, server_id, "2.54", image=cloud.image_id, key_name="key2").status_code
            == 202
        )
        server = wait_for(api, server_id, "ERROR")
        assert server["fault"]["message"] == "rebuild failed: disk gone"
        from cloudseed.servers import records

        with cell_db.read() as session:
            record = records.load(session, server_id)
        # A rebuild's values apply only when it succeeds: the failed one left the old key,
        # consistent in both places, and no history entry.
        assert record.instance.key_name == record.keypairs[0]["name"] == "key1"
        assert record.instance.key_data == record.keypairs[0]["public_key"] == cloud.key1
        assert [c["action"] for c in history(api, server_id) if c["field"] == "key_pair"] == [
            "create"
        ]
        # ERROR allows another rebuild, which recovers the server.
        assert self.rebuild(api, server_id, "2.54", image=cloud.image_id).status_code == 202
        assert "fault" not in wait_for(api, server_id, "ACTIVE")


class TestUserDataUpdate:
    def test_put_user_data_at_2_105(self, api, cloud):
        server_id = create_server(api, cloud, user_data=b64("old"))["id"]
        wait_for(api, server_id, "ACTIVE")
        r = api.put(
            f"/v2.1/servers/{server_id}",
            headers=mv("2.104"),
            json={"server": {"user_data": b64("new")}},
        )
        assert r.status_code == 400
        r = api.put(
            f"/v2.1/servers/{server_id}",
            headers=mv("2.105"),
            json={"server": {"user_data": b64("new")}},
        )
        assert r.status_code == 200, r.text
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == b64("new")
        r = api.put(
            f"/v2.1/servers/{server_id}", headers=mv("2.105"), json={"server": {"user_data": None}}
        )
        assert r.status_code == 200
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] is None
        entries = [c for c in history(api, server_id) if c["field"] == "user_data"]
        assert [c["action"] for c in entries] == ["create", "update", "update"]
        assert entries[1]["new"]["size"] == 3 and entries[2]["new"] is None

    def test_put_user_data_refused_with_config_drive(self, api, cloud):
        server_id = create_server(api, cloud, config_drive=True, user_data=b64("old"))["id"]
        wait_for(api, server_id, "ACTIVE")
        r = api.put(
            f"/v2.1/servers/{server_id}",
            headers=mv("2.105"),
            json={"server": {"user_data": b64("new")}},
        )
        assert r.status_code == 409
        assert "hard reboot with user_data" in r.json()["conflictingRequest"]["message"]
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == b64("old")

    def test_hard_reboot_with_user_data(self, api, cloud):
        server_id = create_server(api, cloud, config_drive=True, user_data=b64("old"))["id"]
        wait_for(api, server_id, "ACTIVE")
        action = f"/v2.1/servers/{server_id}/action"
        r = api.post(
            action, headers=mv("2.105"), json={"reboot": {"type": "SOFT", "user_data": b64("new")}}
        )
        assert r.status_code == 400
        r = api.post(
            action, headers=mv("2.104"), json={"reboot": {"type": "HARD", "user_data": b64("new")}}
        )
        assert r.status_code == 400
        r = api.post(
            action, headers=mv("2.105"), json={"reboot": {"type": "HARD", "user_data": b64("new")}}
        )
        assert r.status_code == 202, r.text
        wait_for(api, server_id, "ACTIVE")
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == b64("new")

    def test_failed_hard_reboot_keeps_old_user_data(self, api, cloud, fake_driver):
        server_id = create_server(api, cloud, config_drive=True, user_data=b64("old"))["id"]
        wait_for(api, server_id, "ACTIVE")
        fake_driver.fail("reboot_hard", uuid=server_id)
        r = api.post(
            f"/v2.1/servers/{server_id}/action",
            headers=mv("2.105"),
            json={"reboot": {"type": "HARD", "user_data": b64("new")}},
        )
        assert r.status_code == 202
        wait_for(api, server_id, "ERROR")
        assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == b64("old")

    def test_a_fault_shows_its_owner_no_host_path(self, api, cloud, fake_driver):
        """A hard reboot of a server whose files are gone: the owner reads Nova's generic
        message (the exception's class), the administrator the path and the traceback."""
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        missing = f"/srv/clone/var/instances/{server_id}/metadata-relay.json"
        fake_driver.fail(
            "reboot_hard",
            uuid=server_id,
            error=FileNotFoundError(2, "No such file or directory", missing),
        )
        action = f"/v2.1/servers/{server_id}/action"
        assert api.post(action, json={"reboot": {"type": "HARD"}}).status_code == 202
        owner_view = wait_for(api, server_id, "ERROR")
        assert owner_view["fault"]["message"] == "FileNotFoundError"
        assert "details" not in owner_view["fault"]
        actions = api.get(f"/v2.1/servers/{server_id}/os-instance-actions", headers=mv("2.84"))
        request_id = actions.json()["instanceActions"][0]["request_id"]
        events = api.get(
            f"/v2.1/servers/{server_id}/os-instance-actions/{request_id}", headers=mv("2.84")
        ).json()["instanceAction"]["events"]
        assert missing not in str(owner_view) + str(events)
        fault = admin_show(api, server_id)["fault"]
        assert fault["message"] == "FileNotFoundError"
        assert missing in fault["details"] and "Traceback" in fault["details"]


class TestLifecycle:
    def test_stop_start_reboot_and_conflicts(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        action = f"/v2.1/servers/{server_id}/action"
        assert api.post(action, json={"os-stop": None}).status_code == 202
        server = wait_for(api, server_id, "SHUTOFF")
        assert server["OS-EXT-STS:power_state"] == 4
        r = api.post(action, json={"reboot": {"type": "SOFT"}})
        assert r.status_code == 409
        assert r.json()["conflictingRequest"]["message"] == (
            f"Cannot 'reboot_soft' instance {server_id} while it is in vm_state stopped"
        )
        assert api.post(action, json={"os-start": None}).status_code == 202
        wait_for(api, server_id, "ACTIVE")
        assert api.post(action, json={"reboot": {"type": "hard"}}).status_code == 202
        wait_for(api, server_id, "ACTIVE")
        assert api.post(action, json={"nonsense": {}}).status_code == 400

    def test_concurrent_operations_exactly_one_wins(
        self, api, api_url, cloud, fake_driver, monkeypatch
    ):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        # The winner's operation must still be running when the others arrive.
        monkeypatch.setattr(fake_driver, "delay", 1.5)
        bodies = [
            {"reboot": {"type": "HARD"}},
            {"rebuild": {"imageRef": cloud.image_id}},
            {"os-stop": None},
            {"reboot": {"type": "SOFT"}},
        ] * 2

        def attempt(body):
            with httpx.Client(
                base_url=api_url, timeout=30, headers={"X-Auth-Token": "alice:proj"}
            ) as client:
                return client.post(f"/v2.1/servers/{server_id}/action", json=body).status_code

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            statuses = sorted(pool.map(attempt, bodies))
        assert statuses == [202] + [409] * 7
        monkeypatch.setattr(fake_driver, "delay", 0.02)
        wait_until(
            lambda: (
                api.get(f"/v2.1/servers/{server_id}").json()["server"]["OS-EXT-STS:task_state"]
                is None
            ),
            timeout=20,
            interval=0.05,
            max_interval=0.05,
            what="the task done",
        )

    def test_delete_frees_the_address(self, api, cloud):
        first = create_server(api, cloud)["id"]
        wait_for(api, first, "ACTIVE")
        assert api.delete(f"/v2.1/servers/{first}").status_code == 204
        assert api.get(f"/v2.1/servers/{first}").status_code == 404
        second = create_server(api, cloud)["id"]
        assert wait_for(api, second, "ACTIVE")["addresses"]["private"][0]["addr"] == "10.0.0.3"

    def test_other_projects_servers_are_not_found(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        r = api.get(f"/v2.1/servers/{server_id}", headers={"X-Auth-Token": "mallory:other"})
        assert r.status_code == 404
        r = api.get(f"/v2.1/servers/{server_id}/bootstrap-history")
        assert r.status_code == 403


class TestLock:
    def test_lock_refuses_the_owner_until_unlocked(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        action = f"/v2.1/servers/{server_id}/action"
        r = api.post(action, json={"lock": {"locked_reason": "audit"}}, headers=mv("2.73"))
        assert r.status_code == 202, r.text
        shown = api.get(f"/v2.1/servers/{server_id}", headers=mv("2.73")).json()["server"]
        assert (shown["locked"], shown["locked_reason"]) == (True, "audit")
        for r in (
            api.post(action, json={"os-stop": None}),
            api.post(action, json={"reboot": {"type": "SOFT"}}),
            api.delete(f"/v2.1/servers/{server_id}"),
            api.post(f"/v2.1/servers/{server_id}/metadata", json={"metadata": {"a": "b"}}),
        ):
            assert r.status_code == 409, r.text
            assert r.json()["conflictingRequest"]["message"] == f"Instance {server_id} is locked"
        assert api.post(action, json={"unlock": None}).status_code == 202
        shown = api.get(f"/v2.1/servers/{server_id}", headers=mv("2.73")).json()["server"]
        assert (shown["locked"], shown["locked_reason"]) == (False, None)
        assert api.post(action, json={"os-stop": None}).status_code == 202
        actions = api.get(f"/v2.1/servers/{server_id}/os-instance-actions").json()
        assert {"lock", "unlock"} <= {a["action"] for a in actions["instanceActions"]}

    def test_an_admins_lock_is_the_admins_to_lift(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        action = f"/v2.1/servers/{server_id}/action"
        other_admin = {"X-Auth-Token": "admin:other"}
        assert api.post(action, json={"lock": None}, headers=other_admin).status_code == 202
        r = api.post(action, json={"unlock": None})
        assert r.status_code == 403, r.text
        # Administrators are not held by a lock.
        assert api.post(action, json={"os-stop": None}, headers=other_admin).status_code == 202
        assert api.post(action, json={"unlock": None}, headers=other_admin).status_code == 202

    def test_locked_reason_only_from_2_73(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        action = f"/v2.1/servers/{server_id}/action"
        r = api.post(action, json={"lock": {"locked_reason": ""}}, headers=mv("2.73"))
        assert r.status_code == 400


class TestAdminActions:
    def test_restore_and_force_delete_find_no_soft_deleted_server(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        action = f"/v2.1/servers/{server_id}/action"
        for verb, operation in (("restore", "restore"), ("forceDelete", "force_delete")):
            r = api.post(action, json={verb: None}, headers=ADMIN)
            assert r.status_code == 409, r.text
            assert r.json()["conflictingRequest"]["message"] == (
                f"Cannot '{operation}' instance {server_id} while it is in vm_state active"
            )
        assert api.post("/v2.1/servers/nope/action", json={"restore": None}).status_code == 404

    def test_inject_network_info_is_for_admins(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        action = f"/v2.1/servers/{server_id}/action"
        assert api.post(action, json={"injectNetworkInfo": None}).status_code == 403
        r = api.post(action, json={"injectNetworkInfo": None}, headers=ADMIN)
        assert r.status_code == 202, r.text


class TestListAndDetails:
    def test_filters_and_pagination(self, api, cloud):
        ids = [
            create_server(api, cloud, name=f"web-{n}", **({"key_name": "key1"} if n % 2 else {}))[
                "id"
            ]
            for n in range(4)
        ]
        for server_id in ids:
            wait_for(api, server_id, "ACTIVE")
        listed = api.get("/v2.1/servers").json()["servers"]
        assert [s["id"] for s in listed] == list(reversed(ids))  # newest first
        assert set(listed[0]) == {"id", "name", "links"}
        page = api.get("/v2.1/servers/detail?limit=2").json()
        assert [s["id"] for s in page["servers"]] == [ids[3], ids[2]]
        nxt = api.get(page["servers_links"][0]["href"]).json()
        assert [s["id"] for s in nxt["servers"]] == [ids[1], ids[0]]
        by_key = api.get("/v2.1/servers?key_name=key1").json()["servers"]
        assert {s["id"] for s in by_key} == {ids[1], ids[3]}
        by_name = api.get("/v2.1/servers?name=web-[12]").json()["servers"]
        assert {s["id"] for s in by_name} == {ids[1], ids[2]}
        # A page of a filtered list, and the page after its marker (the filter applied
        # before the page is cut).
        named = api.get("/v2.1/servers?name=web-[013]&limit=2").json()["servers"]
        assert [s["id"] for s in named] == [ids[3], ids[1]]
        after = api.get(f"/v2.1/servers?name=web-[013]&limit=2&marker={ids[1]}").json()
        assert [s["id"] for s in after["servers"]] == [ids[0]]
        assert api.get(f"/v2.1/servers?limit=1&marker={ids[0]}").json()["servers"] == []
        assert api.get("/v2.1/servers?status=SHUTOFF").json()["servers"] == []
        assert len(api.get("/v2.1/servers?status=ACTIVE").json()["servers"]) == 4
        r = api.get("/v2.1/servers?marker=nope")
        assert r.status_code == 400

    def test_all_tenants_as_nova_reads_it(self, api, cloud):
        """Nova's ``is_all_tenants``: false-ish values (oslo's strict bool_from_string) list the
        caller's own servers, even for a non-administrator; true-ish or empty values need the
        get_all_tenants policy; anything else is a 400."""
        mine = create_server(api, cloud)["id"]
        r = api.post(
            "/v2.1/servers",
            headers={"X-Auth-Token": "bob:other"},
            json={"server": {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1"}},
        )
        assert r.status_code == 202, r.text
        theirs = r.json()["server"]["id"]
        for value in ("0", "false", "FALSE", "off", "no", "n", "f", " 0 "):
            r = api.get("/v2.1/servers", params={"all_tenants": value})
            assert r.status_code == 200, (value, r.text)
            assert [s["id"] for s in r.json()["servers"]] == [mine]
        for value in ("1", "true", "yes", "on", "t", "y", ""):
            r = api.get("/v2.1/servers", params={"all_tenants": value})
            assert r.status_code == 403, (value, r.text)
            assert r.json()["forbidden"]["code"] == 403
            r = api.get("/v2.1/servers", params={"all_tenants": value}, headers=ADMIN)
            assert r.status_code == 200, (value, r.text)
            assert {s["id"] for s in r.json()["servers"]} == {mine, theirs}
        r = api.get("/v2.1/servers/detail", params={"all_tenants": "maybe"})
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"] == (
            "Unrecognized value 'maybe', acceptable values are: '0', '1', 'f', 'false', 'n', "
            "'no', 'off', 'on', 't', 'true', 'y', 'yes'"
        )

    def test_metadata_and_instance_actions(self, api, cloud):
        server_id = create_server(api, cloud, metadata={"a": "1"})["id"]
        wait_for(api, server_id, "ACTIVE")
        base = f"/v2.1/servers/{server_id}/metadata"
        assert api.post(base, json={"metadata": {"b": "2"}}).json() == {
            "metadata": {"a": "1", "b": "2"}
        }
        assert api.put(base, json={"metadata": {"c": "3"}}).json() == {"metadata": {"c": "3"}}
        assert api.put(f"{base}/d", json={"meta": {"d": "4"}}).status_code == 200
        assert api.get(f"{base}/d").json() == {"meta": {"d": "4"}}
        assert api.delete(f"{base}/d").status_code == 204
        assert api.get(f"{base}/d").status_code == 404
        actions = api.get(f"/v2.1/servers/{server_id}/os-instance-actions").json()
        first = actions["instanceActions"][-1]
        assert first["action"] == "create"
        detail = api.get(
            f"/v2.1/servers/{server_id}/os-instance-actions/{first['request_id']}", headers=ADMIN
        ).json()["instanceAction"]
        assert detail["events"][0]["event"] == "compute__do_build_and_run_instance"
        assert detail["events"][0]["result"] == "Success"

    def test_admin_filters_project_and_host(self, api, cloud):
        mine = create_server(api, cloud)["id"]
        wait_for(api, mine, "ACTIVE")
        host = admin_show(api, mine)["OS-EXT-SRV-ATTR:host"]

        def ids(headers=ADMIN, **params):
            r = api.get("/v2.1/servers", params=params, headers=headers)
            assert r.status_code == 200, r.text
            return {s["id"] for s in r.json()["servers"]}

        # tenant_id alone is ignored (the admin's own project, "proj" here too).
        assert ids(tenant_id="other") == {mine}
        assert ids(all_tenants="1", tenant_id="other") == set()
        assert ids(all_tenants="1", project_id="proj") == {mine}
        assert ids(all_tenants="1", host=host) == {mine}
        assert ids(all_tenants="1", host="nowhere") == set()
        # Not an administrator's filter for others: ignored.
        assert ids(headers={}, host="nowhere") == {mine}

    def test_metadata_items_quota(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        base = f"/v2.1/servers/{server_id}/metadata"
        many = {f"k{n}": "v" for n in range(128)}
        assert api.put(base, json={"metadata": many}).status_code == 200
        for r in (
            api.post(base, json={"metadata": {"one": "more"}}),
            api.put(f"{base}/one", json={"meta": {"one": "more"}}),
            api.put(base, json={"metadata": {**many, "one": "more"}}),
        ):
            assert r.status_code == 403, r.text
            assert r.json()["forbidden"]["message"] == (
                "Maximum number of metadata items exceeds 128"
            )
        assert len(api.get(base).json()["metadata"]) == 128

    def test_actions_of_a_deleted_server_from_2_21(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        assert api.delete(f"/v2.1/servers/{server_id}").status_code == 204
        base = f"/v2.1/servers/{server_id}/os-instance-actions"
        assert api.get(base, headers=mv("2.20")).status_code == 404
        listed = api.get(base, headers=mv("2.21")).json()["instanceActions"]
        assert [a["action"] for a in listed] == ["delete", "create"]
        shown = api.get(f"{base}/{listed[1]['request_id']}", headers=mv("2.21"))
        assert shown.status_code == 200 and shown.json()["instanceAction"]["action"] == "create"

    def test_list_filters_image_flavor_ip(self, api, cloud):
        one = create_server(api, cloud)["id"]
        two = create_server(api, cloud, "2.1", imageRef=cloud.image2_id)["id"]
        for server_id in (one, two):
            wait_for(api, server_id, "ACTIVE")

        def ids(**params):
            r = api.get("/v2.1/servers", params=params)
            assert r.status_code == 200, r.text
            return {s["id"] for s in r.json()["servers"]}

        assert ids(image=cloud.image2_id) == {two}
        assert ids(image=f"http://x/images/{cloud.image_id}") == {one}
        assert ids(flavor="1") == {one, two}
        assert ids(flavor="nope") == set()
        address = admin_show(api, one)["addresses"]["private"][0]["addr"]
        assert ids(ip=address.replace(".", r"\.") + "$") == {one}
        assert ids(ip="^192\\.") == set()

    def test_flavors_and_images(self, api, cloud):
        flavors = api.get("/v2.1/flavors/detail").json()["flavors"]
        assert flavors[0]["name"] == "m1.tiny" and flavors[0]["ram"] == 512
        assert api.get("/v2.1/flavors/1").json()["flavor"]["vcpus"] == 1
        image = api.get(f"/v2.1/images/{cloud.image_id}").json()["image"]
        assert image["name"] == "cirros" and image["status"] == "ACTIVE"
        assert api.get("/v2.1/flavors/nope").status_code == 404


class TestRecordedDetails:
    def test_boot_roles_and_mandatory_config_drive(self, api, api_db, cloud, cell_db, tmp_path):
        from cloudseed.images import service as images
        from cloudseed.servers import records

        raw = tmp_path / "cd.raw"
        raw.write_bytes(b"\0" * 512)

        image_id = api_db.run(
            lambda session: (
                images.add_image(
                    session,
                    name="cd",
                    path=raw,
                    disk_format="raw",
                    properties={"img_config_drive": "mandatory"},
                ).uuid
            ),
            write=True,
        )
        r = api.post(
            "/v2.1/servers",
            headers=ADMIN,
            json={"server": {"name": "vm", "imageRef": image_id, "flavorRef": "1"}},
        )
        server_id = r.json()["server"]["id"]
        server = wait_until(
            lambda: s if (s := admin_show(api, server_id))["status"] == "ACTIVE" else None,
            timeout=20,
            interval=0.02,
            max_interval=0.02,
            what="the server ACTIVE",
        )
        assert server["config_drive"] == "True"
        with cell_db.read() as session:
            record = records.load(session, server_id)
        assert record.system_metadata["boot_roles"] == "admin,member,reader"
        assert record.system_metadata["image_img_config_drive"] == "mandatory"

    def test_boot_source_takes_kernel_command_line_and_cdrom_bus(self, api_db, tmp_path):
        from cloudseed.images import service as images

        raw = tmp_path / "disk.raw"
        raw.write_bytes(b"\0" * 512)

        def work2(session: Session) -> tuple[str, str]:
            kernel = images.add_image(session, name="k", path=raw, disk_format="raw").uuid
            image_id = images.add_image(
                session,
                name="d",
                path=raw,
                disk_format="raw",
                properties={
                    "kernel_id": kernel,
                    "os_command_line": "console=ttyS0",
                    "hw_cdrom_bus": "scsi",
                },
            ).uuid
            plain_id = images.add_image(session, name="p", path=raw, disk_format="raw").uuid
            return image_id, plain_id

        image_id, plain_id = api_db.run(work2, write=True)
        with api_db.read() as session:
            boot = images.boot_source(session, image_id)
            plain = images.boot_source(session, plain_id)
            kernel_id = images.get_image(session, "k").uuid
        assert boot is not None and plain is not None
        assert boot.kernel is not None and boot.kernel.image_id == kernel_id
        assert (boot.kernel.size, boot.cmdline, boot.cdrom_bus) == (512, "console=ttyS0", "scsi")
        assert (plain.kernel, plain.cmdline, plain.cdrom_bus) == (None, None, None)

    def test_hostname_from_2_90(self, api, cloud):
        r = api.post(
            "/v2.1/servers",
            headers=mv("2.90"),
            json={
                "server": {
                    "name": "My Web",
                    "imageRef": cloud.image_id,
                    "flavorRef": "1",
                    "networks": "none",
                    "hostname": "web01",
                }
            },
        )
        server_id = r.json()["server"]["id"]
        server = wait_for(api, server_id, "ACTIVE", version="2.90")
        assert server["OS-EXT-SRV-ATTR:hostname"] == "web01"
        r = api.put(
            f"/v2.1/servers/{server_id}",
            headers=mv("2.90"),
            json={"server": {"hostname": "web02", "name": "renamed"}},
        )
        assert r.status_code == 200
        assert r.json()["server"]["OS-EXT-SRV-ATTR:hostname"] == "web02"
        assert r.json()["server"]["name"] == "renamed"
        r = api.put(
            f"/v2.1/servers/{server_id}",
            headers=mv("2.90"),
            json={"server": {"hostname": "bad_name"}},
        )
        assert r.status_code == 400
        default = create_server(api, cloud, name="Ünïcode Box_1")["id"]
        assert admin_show(api, default)["OS-EXT-SRV-ATTR:hostname"] == "unicode-box-1"

    def test_changes_since_includes_deleted(self, api, cloud):
        server_id = create_server(api, cloud)["id"]
        wait_for(api, server_id, "ACTIVE")
        stamp = api.get(f"/v2.1/servers/{server_id}").json()["server"]["updated"]
        assert api.delete(f"/v2.1/servers/{server_id}").status_code == 204
        listed = api.get(f"/v2.1/servers/detail?changes-since={stamp}").json()["servers"]
        assert [(s["id"], s["status"]) for s in listed] == [(server_id, "DELETED")]
        assert api.get("/v2.1/servers").json()["servers"] == []


class TestImageAndNetworkServices:
    def test_glance_slice(self, api, cloud, api_url):
        versions = httpx.get(f"{api_url}/image").json()["versions"]  # public, like Glance's
        assert versions[0]["links"][0]["href"] == f"{api_url}/image/v2/"
        image = api.get(f"/image/v2/images/{cloud.image_id}").json()
        assert (image["id"], image["name"], image["status"]) == (cloud.image_id, "cirros", "active")
        assert api.get("/image/v2/images/cirros").status_code == 404  # ids only, as Glance
        named = api.get("/image/v2/images?name=debian").json()["images"]
        assert [i["id"] for i in named] == [cloud.image2_id]
        assert httpx.get(f"{api_url}/image/v2/images").status_code == 401

    def test_neutron_slice(self, api, cloud, api_url):
        assert httpx.get(f"{api_url}/network").json()["versions"][0]["id"] == "v2.0"
        network = api.get(f"/network/v2.0/networks/{cloud.network_id}").json()["network"]
        assert (network["name"], network["status"]) == ("private", "ACTIVE")
        assert api.get("/network/v2.0/networks/private").status_code == 404
        named = api.get("/network/v2.0/networks?name=private").json()["networks"]
        assert [n["id"] for n in named] == [cloud.network_id]


def test_a_mac_collision_draws_again(
    api: httpx.Client, api_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud = make_cloud(api, api_db, tmp_path)
    first = wait_for(api, create_server(api, cloud, "2.37")["id"], "ACTIVE", version="2.37")
    taken = first["addresses"]["private"][0]["OS-EXT-IPS-MAC:mac_addr"]
    # Both new ports first draw the existing MAC, then the same new one twice.
    draws = iter([taken, taken, "fa:16:3e:aa:bb:01", "fa:16:3e:aa:bb:01", "fa:16:3e:aa:bb:02"])
    monkeypatch.setattr(networks, "random_mac", lambda: next(draws))
    body = {
        "name": "pair",
        "imageRef": cloud.image_id,
        "flavorRef": "1",
        "networks": "auto",
        "min_count": 2,
    }
    r = api.post("/v2.1/servers", json={"server": body}, headers=mv("2.37"))
    assert r.status_code == 202, r.text
    servers = api.get("/v2.1/servers/detail", params={"name": "pair"}).json()["servers"]
    macs = sorted(s["addresses"]["private"][0]["OS-EXT-IPS-MAC:mac_addr"] for s in servers)
    assert macs == ["fa:16:3e:aa:bb:01", "fa:16:3e:aa:bb:02"]


class TestFlavorMustHoldTheImage:
    """Nova's 400s when the flavor cannot hold the image, on create and rebuild, compared with
    the image's virtual size (a sparse 2 GiB file here, the flavor's disk is 1 GiB)."""

    def test_create_and_rebuild_refuse_an_image_bigger_than_the_flavor(
        self, api, api_db, cell_db, cloud, tmp_path
    ):
        big = tmp_path / "big.raw"
        with big.open("wb") as fh:
            fh.truncate(2 << 30)

        big_id = api_db.run(
            lambda session: images.add_image(session, name="big", path=big, disk_format="raw").uuid,
            write=True,
        )
        before = snapshot(cell_db)
        r = api.post(
            "/v2.1/servers",
            json={"server": {"name": "vm", "imageRef": big_id, "flavorRef": "1"}},
        )
        assert r.status_code == 400, r.text
        assert r.json()["badRequest"]["message"] == (
            "Flavor's disk is too small for requested image. Flavor disk is 1073741824 bytes, "
            "image is 2147483648 bytes."
        )
        assert changes(before, snapshot(cell_db)) == []
        server = create_server(api, cloud)
        wait_for(api, server["id"], "ACTIVE")
        r = api.post(f"/v2.1/servers/{server['id']}/action", json={"rebuild": {"imageRef": big_id}})
        assert r.status_code == 400 and "Flavor's disk is too small" in r.text, r.text
        assert wait_for(api, server["id"], "ACTIVE")["image"]["id"] == cloud.image_id
