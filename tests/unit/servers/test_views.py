"""Server and instance action bodies, field by field and microversion by microversion, as
Nova's view builder and ``InstanceActionsController`` make them (tempest checks the same
bodies with ``additionalProperties: false``).

Each table names the microversion from which a field appears; the tests check the exact set
of keys on both sides of every boundary, for administrators and for everyone else.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import pytest

from cloudseed.servers import views
from cloudseed.servers.history import action_views
from cloudseed.servers.models import FixedIP, Instance, InstanceExtra, Port
from cloudseed.servers.records import ServerRecord
from cloudseed.web.microversions import APIVersion

BASE = "http://cloud.test/v2.1"
NOW = dt.datetime(2025, 1, 2, 3, 4, 5)


def v(text: str) -> APIVersion:
    major, minor = text.split(".")
    return APIVersion(int(major), int(minor))


def record(**instance: Any) -> ServerRecord:
    values: dict[str, Any] = {
        "id": 7,
        "uuid": "11111111-2222-3333-4444-555555555555",
        "display_name": "vm",
        "hostname": "vm",
        "project_id": "proj",
        "user_id": "alice",
        "image_ref": "img",
        "flavor_id": "1",
        "vm_state": "active",
        "task_state": None,
        "power_state": 1,
        "key_name": "key1",
        "user_data": "aGk=",
        "config_drive": "",
        "launch_index": 0,
        "reservation_id": "r-1",
        "locked": False,
        "host": "compute1",
        "node": "compute1",
        "created_at": NOW,
        "updated_at": NOW,
        "launched_at": NOW,
    }
    values.update(instance)
    port = Port(
        uuid="p1",
        instance_uuid=values["uuid"],
        network_id="n1",
        network_name="private",
        mac_address="fa:16:3e:00:00:01",
        mtu=1500,
        network_info="{}",
    )
    ip = FixedIP(address="10.0.0.3", version=4, port_uuid="p1", instance_uuid=values["uuid"])
    return ServerRecord(
        instance=Instance(**values),
        extra=InstanceExtra(flavor=json.dumps({"id": "1", "name": "m1.tiny", "vcpus": 1})),
        metadata={},
        system_metadata={},
        ports=[(port, [ip])],
    )


# --- servers -------------------------------------------------------------------------------------

# In every view, at every microversion (``progress``: an ACTIVE server).
COMMON = {
    "accessIPv4",
    "accessIPv6",
    "addresses",
    "created",
    "flavor",
    "hostId",
    "id",
    "image",
    "links",
    "metadata",
    "name",
    "status",
    "tenant_id",
    "user_id",
    "updated",
    "OS-DCF:diskConfig",
    "progress",
}
# Only in the full view (GET; PUT and rebuild from 2.75).
FULL_ONLY = {
    "OS-EXT-AZ:availability_zone",
    "config_drive",
    "key_name",
    "OS-SRV-USG:launched_at",
    "OS-SRV-USG:terminated_at",
    "security_groups",
    "OS-EXT-STS:task_state",
    "OS-EXT-STS:vm_state",
    "OS-EXT-STS:power_state",
    "os-extended-volumes:volumes_attached",
}
# Administrators' part of the full view (extended server attributes, host status).
ADMIN_FULL = {
    "2.1": {
        "OS-EXT-SRV-ATTR:host",
        "OS-EXT-SRV-ATTR:instance_name",
        "OS-EXT-SRV-ATTR:hypervisor_hostname",
    },
    "2.3": {
        "OS-EXT-SRV-ATTR:hostname",
        "OS-EXT-SRV-ATTR:kernel_id",
        "OS-EXT-SRV-ATTR:launch_index",
        "OS-EXT-SRV-ATTR:ramdisk_id",
        "OS-EXT-SRV-ATTR:reservation_id",
        "OS-EXT-SRV-ATTR:root_device_name",
        "OS-EXT-SRV-ATTR:user_data",
    },
    "2.16": {"host_status"},
}
# Fields every view gains at a microversion, for everyone.
SINCE = {
    "2.9": {"locked"},
    "2.19": {"description"},
    "2.26": {"tags"},
    "2.63": {"trusted_image_certificates"},
    "2.71": {"server_groups"},  # GET, PUT and rebuild; not in the detailed list
    "2.73": {"locked_reason"},
    "2.96": {"pinned_availability_zone"},
    "2.100": {"scheduler_hints"},
    "2.106": {"key_names", "block_project_keys", "keys", "key_delivery"},  # cloudseed's
}
NON_ADMIN_SINCE = {"2.90": {"OS-EXT-SRV-ATTR:hostname"}}
VERSIONS = [
    "2.1",
    "2.2",
    "2.3",
    "2.8",
    "2.9",
    "2.15",
    "2.16",
    "2.18",
    "2.19",
    "2.25",
    "2.26",
    "2.53",
    "2.54",
    "2.56",
    "2.57",
    "2.62",
    "2.63",
    "2.70",
    "2.71",
    "2.72",
    "2.73",
    "2.74",
    "2.75",
    "2.89",
    "2.90",
    "2.95",
    "2.96",
    "2.99",
    "2.100",
    "2.104",
    "2.105",
    "2.106",
]


def _since(table: dict[str, set[str]], version: str) -> set[str]:
    return set().union(*(fields for since, fields in table.items() if v(version) >= v(since)))


def full_view_keys(version: str, *, admin: bool) -> set[str]:
    keys = COMMON | FULL_ONLY | _since(SINCE, version)
    if admin:
        keys |= _since(ADMIN_FULL, version)
    else:
        keys |= _since(NON_ADMIN_SINCE, version)
    return keys


@pytest.mark.parametrize("admin", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_show(version: str, admin: bool) -> None:
    server = views.show(record(), v(version), BASE, admin=admin)["server"]
    assert set(server) == full_view_keys(version, admin=admin)
    assert set(server["addresses"]["private"][0]) == {
        "version",
        "addr",
        "OS-EXT-IPS:type",
        "OS-EXT-IPS-MAC:mac_addr",
    }


# Fields the limited view (PUT and rebuild below 2.75) adds to COMMON, by microversion.
LIMITED_SINCE = {since: fields for since, fields in SINCE.items() if v(since) < v("2.75")}
REBUILD_SINCE = {"2.54": {"key_name"}, "2.57": {"user_data"}}


@pytest.mark.parametrize("admin", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_update(version: str, admin: bool) -> None:
    """PUT: the limited view below 2.75 (no key_name), the full one (GET's) from 2.75."""
    server = views.updated(record(), v(version), BASE, admin=admin)["server"]
    if v(version) >= v("2.75"):
        assert server == views.show(record(), v(version), BASE, admin=admin)["server"]
        return
    assert set(server) == COMMON | _since(LIMITED_SINCE, version)
    assert set(server["addresses"]["private"][0]) == {"version", "addr"}


@pytest.mark.parametrize("admin", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_rebuild(version: str, admin: bool) -> None:
    """Rebuild: the limited view below 2.75 with key_name from 2.54; from 2.75 GET's view;
    user_data from 2.57 in place of OS-EXT-SRV-ATTR:user_data; adminPass always."""
    server = views.rebuilt(record(), v(version), BASE, admin=admin, admin_password="pw")["server"]
    extra = {"adminPass"} | _since(REBUILD_SINCE, version)
    if v(version) >= v("2.75"):
        expected = full_view_keys(version, admin=admin) - {"OS-EXT-SRV-ATTR:user_data"}
        assert set(server) == expected | extra
        assert set(server["addresses"]["private"][0]) >= {"OS-EXT-IPS:type"}
    else:
        assert set(server) == COMMON | _since(LIMITED_SINCE, version) | extra
        assert set(server["addresses"]["private"][0]) == {"version", "addr"}
    assert server["adminPass"] == "pw"
    if "user_data" in server:
        assert server["user_data"] == "aGk="
    if "key_name" in server:
        assert server["key_name"] == "key1"


def test_pinned_availability_zone_is_the_stored_pin() -> None:
    pinned = record(availability_zone="az1")
    pinned.system_metadata["pinned_availability_zone"] = "az1"
    shown = views.show(pinned, v("2.96"), BASE, admin=False)["server"]
    assert (shown["OS-EXT-AZ:availability_zone"], shown["pinned_availability_zone"]) == (
        "az1",
        "az1",
    )
    unpinned = views.show(record(availability_zone="az1"), v("2.104"), BASE, admin=False)
    assert unpinned["server"]["pinned_availability_zone"] is None


def test_security_groups_are_left_out_when_there_are_none() -> None:
    """Kept per server; a server from before they were kept is in "default" if it has ports
    (Nova's groups are its ports')."""
    legacy = record()
    assert views.show(legacy, v("2.1"), BASE, admin=False)["server"]["security_groups"] == [
        {"name": "default"}
    ]
    legacy.ports = []
    assert "security_groups" not in views.show(legacy, v("2.1"), BASE, admin=False)["server"]
    emptied = record()
    emptied.system_metadata["security_groups"] = "[]"
    assert "security_groups" not in views.show(emptied, v("2.104"), BASE, admin=True)["server"]
    assert views.security_groups_detailed(emptied) == []
    two = record()
    two.system_metadata["security_groups"] = '["web", "default"]'
    assert views.show(two, v("2.1"), BASE, admin=False)["server"]["security_groups"] == [
        {"name": "web"},
        {"name": "default"},
    ]
    assert [g["name"] for g in views.security_groups_detailed(two)] == ["default", "web"]


def test_host_id_hashes_host_with_project() -> None:
    server = views.show(record(), v("2.1"), BASE, admin=False)["server"]
    assert server["hostId"] == hashlib.sha224(b"projcompute1").hexdigest()
    unscheduled = views.show(record(host=None), v("2.1"), BASE, admin=False)["server"]
    assert unscheduled["hostId"] == ""


# --- instance actions ----------------------------------------------------------------------------

ACTION_KEYS = {
    "action",
    "instance_uuid",
    "request_id",
    "user_id",
    "project_id",
    "start_time",
    "message",
}
ACTION_SINCE = {"2.58": {"updated_at"}}
EVENT_KEYS = {"event", "start_time", "finish_time", "result"}
# (since, field, who): who is "admin" or "all".
EVENT_FIELDS = [
    ("2.1", "traceback", "admin"),
    ("2.62", "host", "admin"),
    ("2.62", "hostId", "all"),
    ("2.84", "details", "all"),
]
EVENTS_FOR_NON_ADMINS_SINCE = "2.51"
ACTION_VERSIONS = [
    "2.1",
    "2.21",
    "2.50",
    "2.51",
    "2.57",
    "2.58",
    "2.61",
    "2.62",
    "2.83",
    "2.84",
    "2.104",
    "2.105",
]


def stored_action() -> dict[str, Any]:
    return {
        "action": "create",
        "instance_uuid": "11111111-2222-3333-4444-555555555555",
        "request_id": "req-1",
        "user_id": "alice",
        "project_id": "proj",
        "start_time": NOW,
        "message": None,
        "updated_at": NOW,
        "events": [
            {
                "event": "compute__do_build_and_run_instance",
                "start_time": NOW,
                "finish_time": NOW,
                "result": "Error",
                "traceback": "Traceback ...",
                "details": "disk gone",
            }
        ],
    }


@pytest.mark.parametrize("version", ACTION_VERSIONS)
def test_action_in_list(version: str) -> None:
    body = action_views.action(stored_action(), v(version))
    assert set(body) == ACTION_KEYS | _since(ACTION_SINCE, version)
    assert body["start_time"] == "2025-01-02T03:04:05"


@pytest.mark.parametrize("admin", [False, True])
@pytest.mark.parametrize("version", ACTION_VERSIONS)
def test_action_with_events(version: str, admin: bool) -> None:
    body = action_views.action_with_events(
        stored_action(), v(version), admin=admin, host="compute1", instance_project_id="proj"
    )
    shows_events = admin or v(version) >= v(EVENTS_FOR_NON_ADMINS_SINCE)
    assert set(body) == ACTION_KEYS | _since(ACTION_SINCE, version) | (
        {"events"} if shows_events else set()
    )
    if not shows_events:
        return
    expected = EVENT_KEYS | {
        field
        for since, field, who in EVENT_FIELDS
        if v(version) >= v(since) and (admin or who == "all")
    }
    (event,) = body["events"]
    assert set(event) == expected
    if "hostId" in event:
        assert event["hostId"] == hashlib.sha224(b"projcompute1").hexdigest()
    if "host" in event:
        assert event["host"] == "compute1"
    if "details" in event:
        assert event["details"] == "disk gone"


def test_event_host_id_uses_the_instance_project_when_the_action_has_none() -> None:
    stored = stored_action() | {"project_id": None}
    body = action_views.action_with_events(
        stored, v("2.62"), admin=True, host="compute1", instance_project_id="other"
    )
    assert body["events"][0]["hostId"] == hashlib.sha224(b"othercompute1").hexdigest()
    unscheduled = action_views.action_with_events(
        stored, v("2.62"), admin=True, host=None, instance_project_id="other"
    )
    event = unscheduled["events"][0]
    assert (event["host"], event["hostId"]) == ("", "")


# --- live keys (2.106): the fields' content ------------------------------------------------------

PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFp1ZGtXAWbA+xe+lf3B1trN2sKXyfb86BpLG3DYvIC6 t@x"


def key_entry(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "user_id": "alice",
        "fingerprint": "aa:bb",
        "fingerprint_sha256": f"SHA256:{name}",
        "public_key": PUBLIC_KEY,
        "type": "ssh",
        "created_at": "2025-01-01T00:00:00",
        **fields,
    }


def test_live_keys_show_each_keys_expiry_and_delivery() -> None:
    server = record()
    server.extra.keypairs = json.dumps(
        [
            key_entry("old", since_generation=1, source="server"),
            key_entry(
                "soon", since_generation=3, source="server", expires_at="2025-01-02T03:04:06Z"
            ),
            key_entry(
                "gone", since_generation=1, source="project", expires_at="2025-01-02T03:04:05Z"
            ),
        ]
    )
    server.extra.keys_generation = 3
    server.extra.keys_applied_generation = 2
    server.extra.keys_applied_via = "login-time check"
    server.extra.keys_applied_at = NOW
    server.extra.keys_failure = json.dumps({"generation": 3, "reason": "no agent", "at": "x"})
    server.extra.block_project_keys = False
    body = views.live_keys(server, now=NOW)
    assert body["key_names"] == ["old", "soon"]
    assert body["block_project_keys"] is False
    assert [(k["name"], k["expired"], k["source"]) for k in body["keys"]] == [
        ("old", False, "server"),
        ("soon", False, "server"),
        ("gone", True, "project"),  # expires_at == now: expired
    ]
    assert [k["delivery"] for k in body["keys"]] == [
        {"state": "applied", "via": "login-time check", "reason": None},
        {"state": "failed", "via": None, "reason": "no agent"},
        {"state": "applied", "via": "login-time check", "reason": None},
    ]
    assert body["key_delivery"] == {
        "generation": 3,
        "applied_generation": 2,
        "state": "failed",
        "via": "login-time check",
        "reason": "no agent",
        "applied_at": "2025-01-02T03:04:05Z",
        "note": None,
    }
    assert set(body["keys"][0]) == {
        "name",
        "user_id",
        "type",
        "fingerprint",
        "fingerprint_sha256",
        "expires_at",
        "expired",
        "source",
        "delivery",
    }


def test_live_keys_say_what_a_config_drive_guest_depends_on() -> None:
    """A guest with a config drive may not reach the metadata service: the state says that its
    key changes then come only through the guest agent (issue 17)."""
    server = record()
    server.extra.keypairs = json.dumps([key_entry("key1")])
    server.instance.config_drive = "True"
    note = views.live_keys(server, now=NOW)["key_delivery"]["note"]
    assert note is not None and "only through the guest agent" in note
    server.instance.config_drive = ""
    assert views.live_keys(server, now=NOW)["key_delivery"]["note"] is None


def test_live_keys_of_a_server_stored_before_2_106() -> None:
    """Entries written before 2.106 lack the new fields: the server's own key, no expiry,
    generation 1, its SHA-256 fingerprint computed from the public key."""
    server = record()
    legacy = key_entry("key1")
    del legacy["fingerprint_sha256"]
    server.extra.keypairs = json.dumps([legacy])
    body = views.live_keys(server, now=NOW)
    (key,) = body["keys"]
    assert (key["source"], key["expires_at"], key["expired"]) == ("server", None, False)
    assert key["fingerprint_sha256"] == "SHA256:YjyoTRpPuKxVEyiEP7ZPEo9b9AdsF/4WS/ScrrSdu38"
    assert key["delivery"]["state"] == "pending"
    assert body["key_delivery"]["generation"] == 1 and body["block_project_keys"] is False
