"""Live keys (2.106) from the API to what the guest is served, on every backend: keys changed
with ``PUT /servers/{id}`` and the project's keys reach ``authorized_keys`` of the metadata
service while the server runs, an expired key stops being served, and the delivery state the
API shows follows what the guest fetched."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from tests.support import keys
from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.waiting import eventually, wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

LIVE = mv("2.106")
ADMIN = {**LIVE, "X-Auth-Token": "admin:proj"}
KEYS = "/openstack/latest/authorized_keys"


def lines(client: httpx.Client) -> list[str]:
    r = client.get(KEYS)
    assert r.status_code == 200, r.text
    return r.text.splitlines()


def delivery(api: httpx.Client, server_id: str) -> dict[str, object]:
    r = api.get(f"/v2.1/servers/{server_id}", headers=LIVE)
    assert r.status_code == 200, r.text
    result: dict[str, object] = r.json()["server"]["key_delivery"]
    return result


def test_key_changes_reach_the_running_guest(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    key3 = keys.ed25519_public("three")
    new = {"keypair": {"name": "key3", "public_key": key3}}
    assert api.post("/v2.1/os-keypairs", json=new).status_code == 200
    created = create_server(
        api, cloud, "2.106", key_names=["key1", "key2"], networks=[{"uuid": cloud.network_id}]
    )
    server = wait_for(api, created["id"], "ACTIVE", version="2.106")
    address = server["addresses"]["loop"][0]["addr"]
    guest = httpx.Client(
        base_url=metadata_url, timeout=10, transport=httpx.HTTPTransport(local_address=address)
    )
    with guest:
        assert lines(guest) == [cloud.key1, cloud.key2]
        eventually(lambda: delivery(api, server["id"])["state"] == "applied")
        assert delivery(api, server["id"])["via"] == "login-time check"

        # The first key goes, a third comes: the next login sees it, with no reboot.
        r = api.put(
            f"/v2.1/servers/{server['id']}",
            headers=LIVE,
            json={"server": {"key_names": ["key2", "key3"]}},
        )
        assert r.status_code == 200, r.text
        eventually(lambda: lines(guest) == [cloud.key2, key3])
        eventually(lambda: delivery(api, server["id"])["applied_generation"] == 2)

        # The project's keys reach it too.
        ops = keys.ed25519_public("ops")
        made = api.post(
            "/v2.1/os-keypairs", json={"keypair": {"name": "ops", "public_key": ops}}, headers=ADMIN
        )
        assert made.status_code == 201, made.text
        r = api.put(
            "/v2.1/os-project-keys/proj",
            headers=ADMIN,
            json={"project_keys": [{"name": "ops", "user_id": "admin"}]},
        )
        assert r.status_code == 200, r.text
        eventually(lambda: lines(guest) == [cloud.key2, key3, ops])

        # key3 expires: no longer served, shown expired. (Its expiry is set only now: an expiry
        # set with the change above ran out before the project's keys arrived in loaded runs.)
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5)
        soon = expiry.isoformat()
        r = api.put(
            f"/v2.1/servers/{server['id']}",
            headers=LIVE,
            json={"server": {"key_names": ["key2", {"name": "key3", "expires_at": soon}]}},
        )
        assert r.status_code == 200, r.text
        wait_until(lambda: dt.datetime.now(dt.UTC) > expiry, what="key3's expiry passed")
        eventually(lambda: lines(guest) == [cloud.key2, ops])
        shown = api.get(f"/v2.1/servers/{server['id']}", headers=LIVE).json()["server"]
        assert [(k["name"], k["expired"]) for k in shown["keys"]] == [
            ("key2", False),
            ("key3", True),
            ("ops", False),
        ]
