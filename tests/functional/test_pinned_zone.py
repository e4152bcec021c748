"""2.104: ``PUT /servers/{id}`` unpins and re-pins a server's availability zone, on each
database (Nova's rules; the transitions themselves: tests/unit/servers/test_pinning.py).

A server is pinned to the zone its create asked for; the session-wide test server's host is in
zone "nova".
"""

from __future__ import annotations

import pytest

from tests.support.cloud import create_server, mv, wait_for


def put(api, server_id, version="2.104", **fields):
    return api.put(f"/v2.1/servers/{server_id}", json={"server": fields}, headers=mv(version))


def pinned(api, server_id, version="2.104"):
    r = api.get(f"/v2.1/servers/{server_id}", headers=mv(version))
    assert r.status_code == 200, r.text
    return r.json()["server"]["pinned_availability_zone"]


def test_created_in_a_zone_is_pinned_to_it(api, cloud):
    asked = create_server(api, cloud, "2.96", availability_zone="nova")["id"]
    anywhere = create_server(api, cloud, "2.96")["id"]
    assert pinned(api, asked, "2.96") == "nova"
    assert pinned(api, anywhere, "2.96") is None
    # Below 2.96 the field is not shown.
    r = api.get(f"/v2.1/servers/{asked}", headers=mv("2.95"))
    assert "pinned_availability_zone" not in r.json()["server"]


def test_unpin_and_repin(api, cloud):
    server_id = create_server(api, cloud, "2.104", availability_zone="nova")["id"]
    wait_for(api, server_id, "ACTIVE")
    r = put(api, server_id, pinned_availability_zone=None)
    assert r.status_code == 200, r.text
    assert r.json()["server"]["pinned_availability_zone"] is None
    assert pinned(api, server_id) is None
    r = put(api, server_id, pinned_availability_zone=None)  # already unpinned: a no-op
    assert r.status_code == 200, r.text
    r = put(api, server_id, pinned_availability_zone="nova", name="renamed")
    assert r.status_code == 200, r.text
    assert (r.json()["server"]["pinned_availability_zone"], r.json()["server"]["name"]) == (
        "nova",
        "renamed",
    )
    assert pinned(api, server_id) == "nova"
    assert put(api, server_id, pinned_availability_zone="nova").status_code == 200  # no-op


@pytest.mark.parametrize("zone", ["az-elsewhere", "no-such-zone"])
def test_a_pin_to_another_zone_is_a_conflict_and_changes_nothing(api, cloud, zone):
    server_id = create_server(api, cloud, "2.104")["id"]
    r = put(api, server_id, pinned_availability_zone=zone, name="renamed")
    assert r.status_code == 409, r.text
    assert r.json() == {
        "conflictingRequest": {
            "code": 409,
            "message": "Server can only be pinned to its current availability zone 'nova', "
            f"but '{zone}' was requested.",
        }
    }
    shown = api.get(f"/v2.1/servers/{server_id}", headers=mv("2.104")).json()["server"]
    assert (shown["name"], shown["pinned_availability_zone"]) == ("vm", None)


def test_a_pinned_server_is_unpinned_first(api, cloud):
    server_id = create_server(api, cloud, "2.104", availability_zone="nova")["id"]
    r = put(api, server_id, pinned_availability_zone="az-elsewhere")
    assert r.status_code == 409, r.text
    assert r.json()["conflictingRequest"]["message"] == (
        "Cannot change pinned availability zone directly. Unpin first by setting "
        "pinned_availability_zone to null."
    )


@pytest.mark.parametrize(
    "version, value", [("2.103", None), ("2.103", "nova"), ("2.104", ""), ("2.104", 7)]
)
def test_refused_below_2_104_and_checked_from_it(api, cloud, version, value):
    server_id = create_server(api, cloud, "2.96", availability_zone="nova")["id"]
    r = put(api, server_id, version, pinned_availability_zone=value)
    assert r.status_code == 400, r.text
    assert pinned(api, server_id) == "nova"
