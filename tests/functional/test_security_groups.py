"""A server's security groups on each database: kept per server, shown as Nova shows them with
Neutron (a server without ports has none), changed by ``addSecurityGroup`` and
``removeSecurityGroup``. Every project has one group, ``default``. (The guest's EC2
``security-groups``: tests/functional/test_metadata_service.py.)"""

from __future__ import annotations

import uuid

import pytest

from tests.support.cloud import create_server, mv, wait_for

OTHER = {"X-Auth-Token": "bob:other"}


def action(api, server_id, body, headers=None):
    return api.post(f"/v2.1/servers/{server_id}/action", json=body, headers=headers)


def groups(api, server_id, version="2.1"):
    server = api.get(f"/v2.1/servers/{server_id}", headers=mv(version)).json()["server"]
    return server.get("security_groups")


def test_a_server_is_in_default_unless_it_asks(api, cloud):
    created = create_server(api, cloud)
    assert created["security_groups"] == [{"name": "default"}]
    asked = create_server(api, cloud, security_groups=[{"name": "default"}, {"name": "default"}])
    # The create's answer echoes the request, as Nova's; the server is in the group once.
    assert asked["security_groups"] == [{"name": "default"}, {"name": "default"}]
    assert groups(api, asked["id"]) == [{"name": "default"}]
    assert groups(api, created["id"]) == [{"name": "default"}]
    r = api.get("/v2.1/servers/detail")
    assert [s["security_groups"] for s in r.json()["servers"]] == [[{"name": "default"}]] * 2


def test_an_unknown_group_is_refused_at_create(api, cloud):
    r = api.post(
        "/v2.1/servers",
        json={
            "server": {
                "name": "vm",
                "imageRef": cloud.image_id,
                "flavorRef": "1",
                "security_groups": [{"name": "web"}],
            }
        },
    )
    assert r.status_code == 400, r.text
    assert r.json()["badRequest"]["message"] == "Security group web not found for project proj."
    assert api.get("/v2.1/servers").json()["servers"] == []


def test_remove_the_only_group_then_add_it_again(api, cloud):
    server_id = create_server(api, cloud)["id"]
    wait_for(api, server_id, "ACTIVE")
    r = action(api, server_id, {"removeSecurityGroup": {"name": "default"}})
    assert (r.status_code, r.content) == (202, b"")
    assert groups(api, server_id) is None  # Nova leaves the key out
    assert api.get(f"/v2.1/servers/{server_id}/os-security-groups").json() == {
        "security_groups": []
    }
    r = action(api, server_id, {"removeSecurityGroup": {"name": "default"}})
    assert r.status_code == 404, r.text
    assert r.json()["itemNotFound"]["message"] == (
        f"Security group default not associated with the instance {server_id}"
    )
    for _ in range(2):  # the second add: already in it, a no-op as with Neutron
        r = action(api, server_id, {"addSecurityGroup": {"name": "default"}})
        assert r.status_code == 202, r.text
        assert groups(api, server_id) == [{"name": "default"}]


def test_os_security_groups_of_a_server(api, cloud):
    server_id = create_server(api, cloud)["id"]
    body = api.get(f"/v2.1/servers/{server_id}/os-security-groups").json()
    (group,) = body["security_groups"]
    assert group == {
        "id": group["id"],
        "name": "default",
        "description": "Default security group",
        "tenant_id": "proj",
        "rules": [],
    }
    uuid.UUID(group["id"])
    # The same group for every server of the project.
    other = create_server(api, cloud)["id"]
    again = api.get(f"/v2.1/servers/{other}/os-security-groups").json()["security_groups"]
    assert again == [group]
    r = api.get(f"/v2.1/servers/{server_id}/os-security-groups", headers=OTHER)
    assert r.status_code == 404


@pytest.mark.parametrize(
    "body, status, message",
    [
        (
            {"addSecurityGroup": {"name": "web"}},
            404,
            "Security group web is not found for project proj",
        ),
        (
            {"removeSecurityGroup": {"name": "web"}},
            404,
            "Security group web is not found for project proj",
        ),
        ({"addSecurityGroup": {"name": "  "}}, 400, "Security group name cannot be empty"),
        ({"addSecurityGroup": {"name": ""}}, 400, None),
        ({"addSecurityGroup": {}}, 400, None),
        ({"removeSecurityGroup": {"name": "default", "x": 1}}, 400, None),
        ({"addSecurityGroup": None}, 400, None),
    ],
)
def test_refused_changes(api, cloud, body, status, message):
    server_id = create_server(api, cloud)["id"]
    r = action(api, server_id, body)
    assert r.status_code == status, r.text
    if message is not None:
        assert next(iter(r.json().values()))["message"] == message
    assert groups(api, server_id) == [{"name": "default"}]


def test_a_server_without_ports_is_in_no_group(api, cloud):
    server_id = create_server(api, cloud, "2.37", networks="none")["id"]
    assert groups(api, server_id, "2.37") is None
    r = action(api, server_id, {"addSecurityGroup": {"name": "default"}})
    assert r.status_code == 404, r.text
    assert r.json()["itemNotFound"]["message"] == (
        f"instance_id {server_id} could not be found as device id on any ports"
    )


def test_another_projects_server_is_not_found(api, cloud):
    server_id = create_server(api, cloud)["id"]
    r = action(api, server_id, {"removeSecurityGroup": {"name": "default"}}, headers=OTHER)
    assert r.status_code == 404, r.text
    assert groups(api, server_id) == [{"name": "default"}]
