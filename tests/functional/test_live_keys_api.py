"""Live keys (2.106) over real HTTP on every backend: key_names with expiry on create, rebuild
and PUT (a running server keeps running), validation, history, the queued ``keys`` operation,
and microversions up to 2.105 unchanged. Project keys: test_project_keys_api.py."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from cloudseed.db.engines import Database
from cloudseed.servers.models import InstanceExtra, Operation
from tests.support.cloud import create_server, mv, wait_for
from tests.support.snapshot import changes, snapshot
from tests.support.waiting import wait_until

LIVE = mv("2.106")
ADMIN = {"X-Auth-Token": "admin:proj"}


def future(seconds: float = 86400) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )


def show(api, server_id, headers=LIVE):
    r = api.get(f"/v2.1/servers/{server_id}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["server"]


def put(api, server_id, body, headers=LIVE):
    return api.put(f"/v2.1/servers/{server_id}", headers=headers, json={"server": body})


def history(api, server_id, field="keys"):
    r = api.get(f"/v2.1/servers/{server_id}/bootstrap-history", headers=ADMIN)
    assert r.status_code == 200, r.text
    return [c for c in r.json()["bootstrap_history"] if c["field"] == field]


def key_operations(cell_db, server_id):
    with cell_db.read() as session:
        return [
            (op.kind, op.payload)
            for op in session.scalars(
                select(Operation)
                .where(Operation.instance_uuid == server_id, Operation.kind == "keys")
                .order_by(Operation.id)
            )
        ]


def extra(cell_db: Database, server_id: str) -> InstanceExtra:
    with cell_db.read() as session:
        row = session.scalar(select(InstanceExtra).where(InstanceExtra.instance_uuid == server_id))
        assert row is not None
        session.expunge(row)
        return row


def wait_delivery(api, server_id, state, timeout=20):
    def in_state():
        delivery = show(api, server_id)["key_delivery"]
        return delivery if delivery["state"] == state else None

    return wait_until(
        in_state, timeout=timeout, interval=0.05, max_interval=0.05, what=f"key delivery {state}"
    )


class TestCreate:
    def test_key_names_with_expiry(self, api, cloud):
        expiry = future()
        created = create_server(
            api, cloud, "2.106", key_names=["key2", {"name": "key1", "expires_at": expiry}]
        )
        server = wait_for(api, created["id"], "ACTIVE", version="2.106")
        assert server["key_name"] == "key2"  # Nova's one key pair: the first
        assert server["key_names"] == ["key2", "key1"]
        assert server["block_project_keys"] is False
        second = server["keys"][1]
        assert second["name"] == "key1" and second["user_id"] == "alice"
        assert second["expires_at"] == expiry and second["expired"] is False
        assert second["source"] == "server" and second["type"] == "ssh"
        assert second["fingerprint_sha256"].startswith("SHA256:")
        assert len(second["fingerprint"]) == 47
        # Nothing has reached the guest yet (the fake driver's guest reads no metadata).
        assert second["delivery"] == {"state": "pending", "via": None, "reason": None}
        assert server["key_delivery"] == {
            "generation": 1,
            "applied_generation": 0,
            "state": "pending",
            "via": None,
            "reason": None,
            "applied_at": None,
            "note": None,
        }
        (row,) = history(api, created["id"])
        assert (row["action"], row["old"], row["user_id"]) == ("create", None, "alice")
        assert [(k["name"], k["expires_at"], k["source"]) for k in row["new"]] == [
            ("key2", None, "server"),
            ("key1", expiry, "server"),
        ]
        assert row["new"][1]["fingerprint_sha256"] == second["fingerprint_sha256"]

    def test_key_name_alone_is_a_one_element_list(self, api, cloud):
        created = create_server(api, cloud, "2.106", key_name="key1")
        server = show(api, created["id"])
        assert (server["key_name"], server["key_names"]) == ("key1", ["key1"])
        assert create_server(api, cloud, "2.106")["id"]  # no key at all

    def test_expiry_forms(self, api, cloud):
        created = create_server(
            api,
            cloud,
            "2.106",
            key_names=[
                {"name": "key1", "expires_at": "2999-01-02T03:04:05"},  # naive: UTC
                {"name": "key2", "expires_at": "2999-01-02T03:04:05+02:00"},
            ],
        )
        keys = show(api, created["id"])["keys"]
        assert [k["expires_at"] for k in keys] == ["2999-01-02T03:04:05Z", "2999-01-02T01:04:05Z"]

    @pytest.mark.parametrize(
        ("fields", "message"),
        [
            ({"key_name": "key1", "key_names": ["key2"]}, "cannot be given together"),
            ({"key_names": ["key1", "key1"]}, "Duplicate key name"),
            ({"key_names": ["key1", {"name": "key1"}]}, "Duplicate key name"),
            ({"key_names": ["nope"]}, "Invalid key_name provided."),
            ({"key_names": [f"k{n}" for n in range(17)]}, "at most 16"),
            ({"key_names": [{"name": "key1", "expires_at": "2001-01-01T00:00:00Z"}]}, "past"),
            ({"key_names": [{"name": "key1", "expires_at": "tomorrow"}]}, "ISO 8601"),
            ({"key_names": [{"name": "key1", "expires_at": "2999-01-01"}]}, "ISO 8601"),
            ({"key_names": [{"name": "key1", "expires_at": "2999-02-30T00:00:00"}]}, "valid"),
            (
                {"key_names": [{"name": "key1", "expires_at": "9999-12-31T23:59:59-14:00"}]},
                "valid",
            ),
            ({"key_names": [{"name": "key1", "expires_at": "2" * 65}]}, "too long"),
            ({"key_names": [{"name": "key1", "when": "x"}]}, "'when' was unexpected"),
            ({"key_names": "key1"}, "key_names"),
            ({"block_project_keys": "perhaps"}, "block_project_keys"),
        ],
    )
    def test_refused_with_nothing_written(self, api, cloud, api_db, cell_db, fields, message):
        before = snapshot(api_db, cell_db)
        body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", "networks": "auto"}
        r = api.post("/v2.1/servers", headers=LIVE, json={"server": {**body, **fields}})
        assert r.status_code == 400, r.text
        assert message in r.json()["badRequest"]["message"]
        assert changes(before, snapshot(api_db, cell_db)) == []

    def test_a_lone_surrogate_is_a_400(self, api, cloud):
        server = f'"name": "vm", "imageRef": "{cloud.image_id}", "flavorRef": "1"'
        keys = '[{"name": "key1", "expires_at": "2999-01-01T00:00:00\\ud800"}]'
        body = f'{{"server": {{{server}, "networks": "auto", "key_names": {keys}}}}}'
        r = api.post(
            "/v2.1/servers",
            headers={**LIVE, "Content-Type": "application/json"},
            content=body.encode(),
        )
        assert r.status_code == 400
        assert "lone surrogate" in r.json()["badRequest"]["message"]


class TestUpdate:
    def test_put_changes_keys_while_the_server_runs(self, api, cloud, cell_db, fake_driver):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        launched = wait_for(api, server_id, "ACTIVE", version="2.106")["OS-SRV-USG:launched_at"]
        expiry = future()
        r = put(api, server_id, {"key_names": [{"name": "key2", "expires_at": expiry}, "key1"]})
        assert r.status_code == 200, r.text
        body = r.json()["server"]
        assert body["key_names"] == ["key2", "key1"] and body["key_name"] == "key2"
        assert body["key_delivery"]["generation"] == 2
        assert [k["delivery"]["state"] for k in body["keys"]] == ["pending", "pending"]
        # No rebuild, no reboot: the same launch, ACTIVE throughout, one instance action.
        server = show(api, server_id)
        assert server["status"] == "ACTIVE" and server["OS-SRV-USG:launched_at"] == launched
        actions = api.get(f"/v2.1/servers/{server_id}/os-instance-actions").json()
        assert [a["action"] for a in actions["instanceActions"]] == ["create"]
        # The change is queued for the compute agent, which pushes it through the guest agent.
        assert key_operations(cell_db, server_id) == [("keys", '{"generation": 2}')]
        delivery = wait_delivery(api, server_id, "applied")
        assert (delivery["generation"], delivery["via"]) == (2, "guest agent")
        keys = show(api, server_id)["keys"]
        applied = {"state": "applied", "via": "guest agent", "reason": None}
        assert [k["delivery"] for k in keys] == [applied, applied]
        assert fake_driver.authorized[server_id]["root"] == [cloud.key2, cloud.key1]
        _created, updated = history(api, server_id)
        assert (updated["action"], updated["user_id"]) == ("update", "alice")
        assert [k["name"] for k in updated["old"]] == ["key1"]
        assert [(k["name"], k["expires_at"]) for k in updated["new"]] == [
            ("key2", expiry),
            ("key1", None),
        ]
        first = history(api, server_id, "key_pair")
        assert [(c["action"], c["new"]["name"]) for c in first] == [
            ("create", "key1"),
            ("update", "key2"),
        ]
        assert extra(cell_db, server_id).keys_boot_generation == 1  # no boot since create

    def test_the_same_keys_again_change_nothing(self, api, cloud, cell_db):
        server_id = create_server(api, cloud, "2.106", key_names=["key1", "key2"])["id"]
        wait_for(api, server_id, "ACTIVE")
        r = put(api, server_id, {"key_names": ["key1", "key2"]})
        assert r.status_code == 200
        assert r.json()["server"]["key_delivery"]["generation"] == 1
        assert key_operations(cell_db, server_id) == []
        assert len(history(api, server_id)) == 1
        r = put(api, server_id, {"key_names": []})  # every own key removed
        assert r.status_code == 200
        body = r.json()["server"]
        assert (body["key_names"], body["keys"], body["key_name"]) == ([], [], None)
        assert history(api, server_id)[-1]["new"] is None

    def test_expired_keys_are_shown_expired(self, api, cloud):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        wait_for(api, server_id, "ACTIVE")
        soon = future(1.0)
        assert put(api, server_id, {"key_names": [{"name": "key1", "expires_at": soon}]}).is_success
        assert show(api, server_id)["keys"][0]["expired"] is False
        expiry = dt.datetime.fromisoformat(soon)
        wait_until(lambda: dt.datetime.now(dt.UTC) > expiry, what="the key's expiry passed")
        key = show(api, server_id)["keys"][0]
        assert (key["expired"], key["expires_at"]) == (True, soon)

    def test_policy_and_state(self, api, cloud, cell_db):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        wait_for(api, server_id, "ACTIVE")
        other = {**LIVE, "X-Auth-Token": "mallory:other"}
        assert put(api, server_id, {"key_names": []}, headers=other).status_code == 404
        action = f"/v2.1/servers/{server_id}/action"
        assert api.post(action, json={"lock": None}).status_code == 202
        r = put(api, server_id, {"key_names": ["key2"]})
        assert r.status_code == 409
        assert r.json()["conflictingRequest"]["message"] == f"Instance {server_id} is locked"
        assert put(api, server_id, {"name": "renamed"}).status_code == 200  # not a key change
        # An administrator is not held by the lock; key pairs are the caller's own.
        r = put(api, server_id, {"key_names": ["key2"]}, headers={**LIVE, **ADMIN})
        assert r.status_code == 400
        assert r.json()["badRequest"]["message"] == "Invalid key_name provided."
        assert api.post(action, json={"unlock": None}).status_code == 202
        assert api.post(action, json={"os-stop": None}).status_code == 202
        r = put(api, server_id, {"key_names": ["key2"]})  # while powering off
        assert r.status_code in (200, 409)
        if r.status_code == 409:
            assert "task_state powering-off" in r.json()["conflictingRequest"]["message"]
        wait_for(api, server_id, "SHUTOFF")
        r = put(api, server_id, {"key_names": ["key2", "key1"]})  # SHUTOFF: allowed
        assert r.status_code == 200, r.text
        kinds = [kind for kind, _ in key_operations(cell_db, server_id)]
        assert kinds and set(kinds) == {"keys"}

    def test_put_refused_below_2_106(self, api, cloud):
        server_id = create_server(api, cloud, key_name="key1")["id"]
        for version in ("2.1", "2.104", "2.105"):
            for body in ({"key_names": ["key2"]}, {"block_project_keys": True}):
                assert put(api, server_id, body, headers=mv(version)).status_code == 400


class TestRebuild:
    def rebuild(self, api, server_id, version="2.106", **fields):
        return api.post(
            f"/v2.1/servers/{server_id}/action",
            headers=mv(version),
            json={"rebuild": {"imageRef": fields.pop("image"), **fields}},
        )

    def test_rebuild_with_key_names_is_a_new_boot_generation(self, api, cloud, cell_db):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        wait_for(api, server_id, "ACTIVE")
        r = self.rebuild(api, server_id, image=cloud.image2_id, key_names=["key2", "key1"])
        assert r.status_code == 202, r.text
        answer = r.json()["server"]
        assert answer["key_names"] == ["key2", "key1"] and answer["key_name"] == "key2"
        assert answer["key_delivery"]["generation"] == 2
        server = wait_for(api, server_id, "ACTIVE", version="2.106")
        assert server["key_names"] == ["key2", "key1"]
        row = extra(cell_db, server_id)
        assert row.keys_generation == row.keys_boot_generation == 2
        assert key_operations(cell_db, server_id) == []  # the new guest boots with them
        assert [c["action"] for c in history(api, server_id)] == ["create", "rebuild"]
        # Without keys the rebuild keeps them, and the new disk is still a new generation.
        assert self.rebuild(api, server_id, image=cloud.image_id).status_code == 202
        assert wait_for(api, server_id, "ACTIVE", version="2.106")["key_names"] == ["key2", "key1"]
        row = extra(cell_db, server_id)
        assert row.keys_generation == row.keys_boot_generation == 3
        assert len(history(api, server_id)) == 2

    def test_rebuild_refusals(self, api, cloud):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        wait_for(api, server_id, "ACTIVE")
        for fields, version in (
            ({"key_name": "key1", "key_names": ["key2"]}, "2.106"),
            ({"key_names": ["key2"]}, "2.105"),
            ({"key_names": ["nope"]}, "2.106"),
        ):
            r = self.rebuild(api, server_id, version, image=cloud.image_id, **fields)
            assert r.status_code == 400, r.text
        assert wait_for(api, server_id, "ACTIVE", version="2.106")["key_names"] == ["key1"]


class TestOlderMicroversions:
    def test_bodies_up_to_2_105_have_no_live_key_fields(self, api, cloud):
        server_id = create_server(api, cloud, "2.106", key_names=["key1", "key2"])["id"]
        wait_for(api, server_id, "ACTIVE")
        live = {"key_names", "keys", "key_delivery", "block_project_keys"}
        for version in ("2.1", "2.75", "2.105"):
            server = show(api, server_id, headers=mv(version))
            assert not live & set(server) and server["key_name"] == "key1"
            detail = api.get("/v2.1/servers/detail", headers=mv(version)).json()["servers"]
            assert not live & set(detail[0])
        assert live <= set(show(api, server_id))

    def test_create_refuses_key_names_below_2_106(self, api, cloud):
        body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", "networks": "auto"}
        for fields in ({"key_names": ["key1"]}, {"block_project_keys": True}):
            r = api.post("/v2.1/servers", headers=mv("2.105"), json={"server": {**body, **fields}})
            assert r.status_code == 400, r.text
