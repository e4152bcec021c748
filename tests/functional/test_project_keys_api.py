"""Project keys (2.106) over real HTTP on every backend: ``/os-project-keys/{project_id}``'s
policy and validation, the fan-out to the project's servers (and not to those that block
project keys, nor to other projects'), and a server's opt-out changed while it runs."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from cloudseed.servers.models import Operation
from tests.support import keys
from tests.support.cloud import create_server, make_cloud, mv, wait_for
from tests.support.snapshot import changes, snapshot

LIVE = mv("2.106")
ADMIN = {**LIVE, "X-Auth-Token": "admin:proj"}
URL = "/v2.1/os-project-keys/proj"


@pytest.fixture()
def cloud(api, api_db, tmp_path):
    made = make_cloud(api, api_db, tmp_path)
    ops = {"keypair": {"name": "ops", "public_key": keys.ed25519_public("ops")}}
    assert api.post("/v2.1/os-keypairs", json=ops, headers=ADMIN).status_code == 201
    return made


def set_project_keys(api, items, headers=ADMIN, url=URL):
    return api.put(url, headers=headers, json={"project_keys": items})


def show(api, server_id, headers=LIVE):
    r = api.get(f"/v2.1/servers/{server_id}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["server"]


def keys_of(api, server_id, headers=LIVE):
    return [(k["name"], k["source"]) for k in show(api, server_id, headers)["keys"]]


def generation(api, server_id, headers=LIVE):
    return show(api, server_id, headers)["key_delivery"]["generation"]


def queued_generations(cell_db, server_id):
    with cell_db.read() as session:
        return [
            op.payload
            for op in session.scalars(
                select(Operation)
                .where(Operation.instance_uuid == server_id, Operation.kind == "keys")
                .order_by(Operation.id)
            )
        ]


def key_history(api, server_id):
    r = api.get(f"/v2.1/servers/{server_id}/bootstrap-history", headers=ADMIN)
    assert r.status_code == 200, r.text
    return [c for c in r.json()["bootstrap_history"] if c["field"] == "keys"]


class TestPolicy:
    def test_not_there_below_2_106(self, api, cloud):
        for method in ("GET", "PUT"):
            r = api.request(
                method,
                URL,
                headers={**ADMIN, **mv("2.105")},
                json={"project_keys": []} if method == "PUT" else None,
            )
            assert r.status_code == 404, r.text
            assert r.json()["itemNotFound"]["message"] == "The resource could not be found."

    def test_who_may_read_and_write(self, api, cloud):
        assert api.get(URL, headers=LIVE).json() == {"project_keys": []}  # alice: proj member
        assert api.get(URL, headers={**LIVE, "X-Auth-Token": "admin:other"}).status_code == 200
        r = api.get(URL, headers={**LIVE, "X-Auth-Token": "bob:other"})
        assert r.status_code == 403
        assert r.json()["forbidden"]["message"] == (
            "Policy doesn't allow cloudseed:os-project-keys:show to be performed."
        )
        r = set_project_keys(api, [{"name": "ops", "user_id": "admin"}], headers=LIVE)
        assert r.status_code == 403
        assert "cloudseed:os-project-keys:update" in r.json()["forbidden"]["message"]
        assert api.get(URL, headers=LIVE).json() == {"project_keys": []}

    @pytest.mark.parametrize(
        ("items", "message"),
        [
            ([{"name": "nope", "user_id": "admin"}], "User admin has no key pair nope"),
            ([{"name": "key1", "user_id": "admin"}], "User admin has no key pair key1"),
            ([{"name": "ops", "user_id": "admin"}] * 2, "Duplicate key pair"),
            ([{"name": "ops"}], "'user_id' is a required property"),
            (
                [{"name": "ops", "user_id": "admin", "expires_at": "2000-01-01T00:00:00Z"}],
                "past",
            ),
            ([{"name": f"k{n}", "user_id": "admin"} for n in range(17)], "at most 16"),
        ],
    )
    def test_refused_with_nothing_written(self, api, cloud, api_db, cell_db, items, message):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        wait_for(api, server_id, "ACTIVE")
        before = snapshot(api_db, cell_db)
        r = set_project_keys(api, items)
        assert r.status_code == 400, r.text
        assert message in r.json()["badRequest"]["message"]
        assert changes(before, snapshot(api_db, cell_db)) == []


class TestFanOut:
    def test_project_keys_reach_every_server_that_takes_them(self, api, cloud, cell_db):
        taking = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        blocking = create_server(api, cloud, "2.106", key_names=["key1"], block_project_keys=True)[
            "id"
        ]
        bob = {**LIVE, "X-Auth-Token": "bob:other"}
        body = {"name": "b", "imageRef": cloud.image_id, "flavorRef": "1", "networks": "auto"}
        r = api.post("/v2.1/servers", headers=bob, json={"server": body})
        others = r.json()["server"]["id"]
        for server_id in (taking, blocking):
            wait_for(api, server_id, "ACTIVE")

        r = set_project_keys(
            api, [{"name": "ops", "user_id": "admin"}, {"name": "key1", "user_id": "alice"}]
        )
        assert r.status_code == 200, r.text
        (ops, key1) = r.json()["project_keys"]
        assert (ops["name"], ops["user_id"], ops["type"], ops["expires_at"]) == (
            "ops",
            "admin",
            "ssh",
            None,
        )
        assert ops["fingerprint_sha256"].startswith("SHA256:") and ops["created_at"]
        assert api.get(URL, headers=LIVE).json()["project_keys"] == [ops, key1]

        # alice's key1 is already the server's own: once, as the server's.
        assert keys_of(api, taking) == [("key1", "server"), ("ops", "project")]
        assert show(api, taking)["key_names"] == ["key1"]
        assert generation(api, taking) == 2
        assert queued_generations(cell_db, taking) == ['{"generation": 2}']
        row = key_history(api, taking)[-1]
        assert (row["action"], row["user_id"]) == ("project_keys", "admin")
        assert [(k["name"], k["source"]) for k in row["new"]] == [
            ("key1", "server"),
            ("ops", "project"),
        ]
        # The server that blocks project keys and another project's server are untouched.
        assert keys_of(api, blocking) == [("key1", "server")]
        assert generation(api, blocking) == 1 and queued_generations(cell_db, blocking) == []
        assert keys_of(api, others, bob) == [] and queued_generations(cell_db, others) == []

        # A server created now gets them at once; without keys of its own, Nova's key_name
        # is the project's first key.
        fresh = create_server(api, cloud, "2.106")["id"]
        assert keys_of(api, fresh) == [("ops", "project"), ("key1", "project")]
        assert show(api, fresh)["key_names"] == [] and generation(api, fresh) == 1
        assert show(api, fresh, mv("2.1"))["key_name"] == "ops"

        # The opt-out changes while the servers run: added, removed.
        r = api.put(
            f"/v2.1/servers/{blocking}",
            headers=LIVE,
            json={"server": {"block_project_keys": False}},
        )
        assert r.status_code == 200, r.text
        assert r.json()["server"]["block_project_keys"] is False
        assert keys_of(api, blocking) == [("key1", "server"), ("ops", "project")]
        assert key_history(api, blocking)[-1]["action"] == "update"
        assert queued_generations(cell_db, blocking) == ['{"generation": 2}']
        r = api.put(
            f"/v2.1/servers/{taking}", headers=LIVE, json={"server": {"block_project_keys": True}}
        )
        assert r.status_code == 200
        assert keys_of(api, taking) == [("key1", "server")] and generation(api, taking) == 3

        # Emptying the list removes them everywhere they were.
        assert set_project_keys(api, []).status_code == 200
        assert keys_of(api, fresh) == [] and keys_of(api, blocking) == [("key1", "server")]
        assert generation(api, taking) == 3  # it blocks them: nothing changed

    def test_expiry_of_a_project_key(self, api, cloud):
        server_id = create_server(api, cloud, "2.106")["id"]
        wait_for(api, server_id, "ACTIVE")
        r = set_project_keys(
            api, [{"name": "ops", "user_id": "admin", "expires_at": "2999-01-01T00:00:00+01:00"}]
        )
        assert r.status_code == 200, r.text
        assert r.json()["project_keys"][0]["expires_at"] == "2998-12-31T23:00:00Z"
        (key,) = show(api, server_id)["keys"]
        assert (key["expires_at"], key["expired"]) == ("2998-12-31T23:00:00Z", False)

    def test_a_project_key_that_is_also_an_own_key_comes_back_when_that_goes(self, api, cloud):
        server_id = create_server(api, cloud, "2.106", key_names=["key1"])["id"]
        wait_for(api, server_id, "ACTIVE")
        assert set_project_keys(api, [{"name": "key1", "user_id": "alice"}]).status_code == 200
        assert keys_of(api, server_id) == [("key1", "server")]
        r = api.put(
            f"/v2.1/servers/{server_id}", headers=LIVE, json={"server": {"key_names": ["key2"]}}
        )
        assert r.status_code == 200, r.text
        assert keys_of(api, server_id) == [("key2", "server"), ("key1", "project")]
        # A rebuild takes the project's keys as they are when it succeeds.
        action = f"/v2.1/servers/{server_id}/action"
        rebuild = {"rebuild": {"imageRef": cloud.image_id, "key_names": ["key1"]}}
        assert api.post(action, headers=LIVE, json=rebuild).status_code == 202
        wait_for(api, server_id, "ACTIVE")
        assert keys_of(api, server_id) == [("key1", "server")]
        rebuild["rebuild"]["key_names"] = []
        assert api.post(action, headers=LIVE, json=rebuild).status_code == 202
        wait_for(api, server_id, "ACTIVE")
        assert keys_of(api, server_id) == [("key1", "project")]
        assert show(api, server_id)["key_names"] == []
