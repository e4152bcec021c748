"""Per-server metadata options (2.109) over real HTTP on every backend, with a real metadata
listener: options on create and in the view (not below 2.109), a PUT on a running server
applied at the guest's next request (403 with the endpoint off, on every path; 401 without a
token when tokens are required, 200 with one), instance tags in both trees, project defaults,
the token-less access audit in the API and in /metrics, and bad input refused with nothing
changed. The token answer's hop limit on the wire: test_metadata_ipv6.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cloudseed.db.engines import Database
from tests.support.cloud import Cloud, b64, create_server, mv, wait_for
from tests.support.guests import Guest, MetadataServer, boot
from tests.support.metrics import scrape, value
from tests.support.snapshot import changes, snapshot
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

OPTS = mv("2.109")
BEFORE = mv("2.108")
ADMIN = {"X-Auth-Token": "admin:proj", **OPTS}
TTL = {"X-aws-ec2-metadata-token-ttl-seconds": "300"}
META = "/openstack/latest/meta_data.json"
UNSET = {
    "http_endpoint": None,
    "http_tokens": None,
    "http_put_response_hop_limit": None,
    "instance_metadata_tags": None,
}


def boot_with(api: httpx.Client, cloud: Cloud, **fields: Any) -> Guest:
    """``boot`` at 2.109 (metadata_options in the body)."""
    server = create_server(api, cloud, "2.109", networks=[{"uuid": cloud.network_id}], **fields)
    server = wait_for(api, server["id"], "ACTIVE", version="2.109")
    (port,) = server["addresses"]["loop"]
    return Guest(server["id"], port["addr"], port["OS-EXT-IPS-MAC:mac_addr"])


def options_of(api: httpx.Client, server_id: str, headers: dict[str, str] = OPTS) -> Any:
    r = api.get(f"/v2.1/servers/{server_id}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["server"].get("metadata_options", "absent")


def put_options(
    api: httpx.Client, server_id: str, options: Any, headers: dict[str, str] = OPTS
) -> httpx.Response:
    return api.put(
        f"/v2.1/servers/{server_id}",
        headers=headers,
        json={"server": {"metadata_options": options}},
    )


def test_options_on_create_in_the_view_and_not_below_2_109(api: httpx.Client, cloud: Cloud) -> None:
    server = create_server(
        api,
        cloud,
        "2.109",
        metadata_options={"http_tokens": "required", "http_put_response_hop_limit": 3},
    )
    assert options_of(api, server["id"]) == {
        **UNSET,
        "http_tokens": "required",
        "http_put_response_hop_limit": 3,
    }
    assert options_of(api, server["id"], BEFORE) == "absent"
    # In the list's details and the PUT's answer at 2.109 too.
    r = api.get("/v2.1/servers/detail", headers=OPTS)
    assert r.json()["servers"][0]["metadata_options"]["http_tokens"] == "required"
    r = put_options(api, server["id"], {"http_tokens": None, "http_endpoint": "enabled"})
    assert r.status_code == 200, r.text
    assert r.json()["server"]["metadata_options"] == {
        **UNSET,
        "http_endpoint": "enabled",
        "http_put_response_hop_limit": 3,
    }
    # Not a member below 2.109: create and PUT refuse it, as any unknown member.
    for response in (
        api.post(
            "/v2.1/servers",
            headers=BEFORE,
            json={
                "server": {
                    "name": "x",
                    "imageRef": cloud.image_id,
                    "flavorRef": "1",
                    "networks": "auto",
                    "metadata_options": {"http_tokens": "required"},
                }
            },
        ),
        put_options(api, server["id"], {"http_tokens": "required"}, BEFORE),
    ):
        assert response.status_code == 400, response.text
        assert "metadata_options" in response.json()["badRequest"]["message"]


def test_a_change_applies_at_the_guests_next_request(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot_with(api, cloud, user_data=b64("#cloud-config\n"))
    with guest.client(metadata_url) as md:
        assert md.get(META).status_code == 200  # cached from now on: answered at once
        assert md.get(META).status_code == 200

        assert put_options(api, guest.id, {"http_tokens": "required"}).status_code == 200
        for path in (META, "/latest/meta-data/instance-id", "/latest/user-data"):
            r = md.get(path)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Token", path
        token = md.put("/latest/api/token", headers=TTL).text
        with_token = {"X-aws-ec2-metadata-token": token}
        assert md.get(META, headers=with_token).status_code == 200
        assert md.get("/latest/user-data", headers=with_token).content == b"#cloud-config\n"

        assert put_options(api, guest.id, {"http_endpoint": "disabled"}).status_code == 200
        refused = [
            md.get(META, headers=with_token),
            md.get(META),
            md.get("/latest/meta-data/"),
            md.get("/openstack"),
            md.head("/latest/user-data", headers=with_token),
            md.put("/latest/api/token", headers=TTL),
            md.post("/openstack/latest/password", content=b"secret"),
            md.get(f"{META}?wait_for_change=true&timeout_sec=1", headers=with_token),
        ]
        assert [r.status_code for r in refused] == [403] * len(refused)
        assert b"disabled" in refused[0].content
        # "/" (the static list health checks ask) is refused to a cached guest only: asked
        # right after a request that cached it (another write to the server, an agent's,
        # may drop it from the cache in between on a busy machine).
        wait_until(
            lambda: md.get(META).status_code == 403 and md.get("/").status_code == 403,
            what='"/" refused to the cached guest',
        )

        # Back on, tokens optional again: the cloud's default for an unset field.
        r = put_options(api, guest.id, {"http_endpoint": None, "http_tokens": None})
        assert r.status_code == 200 and r.json()["server"]["metadata_options"] == UNSET
        assert md.get(META).status_code == 200
        assert md.get("/").status_code == 200


def test_optional_tokens_win_over_the_clouds_requirement(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    relaxed = boot_with(api, cloud, metadata_options={"http_tokens": "optional"})
    legacy = boot_with(api, cloud, metadata={"metadata_http_tokens": "required"})
    plain = boot(api, cloud)
    with metadata_server(("metadata", {"require_token": True})) as url:
        with relaxed.client(url) as md:
            assert md.get(META).status_code == 200
        with plain.client(url) as md:
            assert md.get(META).status_code == 401
        with legacy.client(url) as md:
            assert md.get(META).status_code == 401
            # The item still requires tokens where the options leave http_tokens unset; an
            # explicit "optional" wins over it.
            assert put_options(api, legacy.id, {"http_tokens": "optional"}).status_code == 200
            assert md.get(META).status_code == 200


def test_instance_tags_in_both_trees(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot_with(
        api,
        cloud,
        metadata={"role": "web", "tier": "front end"},
        metadata_options={"instance_metadata_tags": "enabled"},
        tags=["blue", "role"],  # Nova's server tags (2.52 on create): keys with empty values
    )
    with guest.client(metadata_url) as md:
        meta = md.get(META).json()
        # A metadata item and a tag of the same key: the item, which has a value.
        assert meta["tags"] == {"blue": "", "role": "web", "tier": "front end"}
        assert meta["meta"] == {"role": "web", "tier": "front end"}  # unchanged
        assert "tags/" in md.get("/latest/meta-data/").text.splitlines()
        assert md.get("/latest/meta-data/tags/").text == "instance/"
        assert md.get("/latest/meta-data/tags/instance").text == "blue\nrole\ntier"
        assert md.get("/latest/meta-data/tags/instance/role").text == "web"
        assert md.get("/latest/meta-data/tags/instance/blue").text == ""
        assert md.get("/2009-04-04/meta-data/tags/instance/tier").text == "front end"
        assert md.get("/latest/meta-data/tags/instance/none").status_code == 404
        # A tag added through the tags API (2.26) reaches the guest at its next request.
        r = api.put(f"/v2.1/servers/{guest.id}/tags/green", headers=OPTS)
        assert r.status_code == 201, r.text
        assert md.get("/latest/meta-data/tags/instance").text == "blue\ngreen\nrole\ntier"

        assert put_options(api, guest.id, {"instance_metadata_tags": "disabled"}).status_code == 200
        assert "tags" not in md.get(META).json()
        assert "tags/" not in md.get("/latest/meta-data/").text.splitlines()
        assert md.get("/latest/meta-data/tags/instance/role").status_code == 404


def test_project_defaults_apply_to_new_servers(api: httpx.Client, cloud: Cloud) -> None:
    url = "/v2.1/os-metadata-options-defaults/proj"
    before = create_server(api, cloud, "2.109")
    assert api.get(url, headers=OPTS).json() == {"metadata_options": UNSET}
    defaults = {"http_tokens": "required", "instance_metadata_tags": "enabled"}
    # Only an administrator sets them; the project's members read them, others may not.
    assert api.put(url, headers=OPTS, json={"metadata_options": defaults}).status_code == 403
    r = api.put(url, headers=ADMIN, json={"metadata_options": defaults})
    assert r.status_code == 200 and r.json()["metadata_options"] == {**UNSET, **defaults}
    member = {"X-Auth-Token": "bob:proj", **OPTS}
    assert api.get(url, headers=member).json()["metadata_options"] == {**UNSET, **defaults}
    stranger = {"X-Auth-Token": "eve:other", **OPTS}
    assert api.get(url, headers=stranger).status_code == 403
    assert api.get(url, headers=BEFORE).status_code == 404

    # A new server gets them where its create leaves a field unset; existing ones keep theirs.
    mine = create_server(api, cloud, "2.109", metadata_options={"http_tokens": "optional"})
    older = create_server(api, cloud, "2.1")  # any microversion: a project default
    assert options_of(api, mine["id"]) == {
        **UNSET,
        "http_tokens": "optional",
        "instance_metadata_tags": "enabled",
    }
    assert options_of(api, older["id"]) == {**UNSET, **defaults}
    assert options_of(api, before["id"]) == UNSET
    # Replaced whole; an empty object removes them.
    assert api.put(url, headers=ADMIN, json={"metadata_options": {}}).status_code == 200
    assert api.get(url, headers=OPTS).json() == {"metadata_options": UNSET}


def test_tokenless_access_audit_in_the_api_and_metrics(
    api: httpx.Client, cloud: Cloud, metadata_server: MetadataServer
) -> None:
    guest = boot(api, cloud, user_data=b64("#!/bin/sh\n"))
    other = boot(api, cloud)
    audit = f"/v2.1/servers/{guest.id}/metadata-access"
    empty = api.get(audit, headers=OPTS).json()["metadata_access"]
    assert empty["tokenless_requests"] == {"count": 0, "last_at": None}
    with (
        metadata_server(("metadata", {"access_audit_interval": 1})) as url,
        guest.client(url) as md,
    ):
        for _ in range(3):
            assert md.get(META).status_code == 200
        assert md.get("/latest/user-data").status_code == 200
        assert md.get("/openstack/latest/password").status_code == 200
        token = md.put("/latest/api/token", headers=TTL).text
        for _ in range(2):  # with a token: not counted
            assert md.get(META, headers={"X-aws-ec2-metadata-token": token}).status_code == 200

        def counted() -> Any:
            shown = api.get(audit, headers=OPTS).json()["metadata_access"]
            return shown if shown["tokenless_requests"]["count"] == 5 else None

        shown = wait_until(counted, timeout=20, interval=0.2, what="the audit's flush")
        assert shown["user_data_reads"]["count"] == 1
        assert shown["password_reads"]["count"] == 1
        assert shown["user_data_reads"]["last_at"].endswith("Z")
        assert shown["recorded_every_seconds"] == 5  # the API node's [metadata] setting
        assert shown["metadata_options"] == {
            "http_endpoint": "enabled",
            "http_tokens": "optional",
            "http_put_response_hop_limit": None,
            "instance_metadata_tags": "disabled",
            "set_on_server": [],
        }
        samples = scrape(url)
        name = "cloudseed_metadata_tokenless_requests_total"
        assert value(samples, name, project="proj", document="other") == 3
        assert value(samples, name, project="proj", document="user_data") == 1
        assert value(samples, name, project="proj", document="password") == 1
        assert not any(guest.id in str(key) for key in samples)

        # Refused for want of a token: still a token-less request (the guest that breaks).
        assert put_options(api, guest.id, {"http_tokens": "required"}).status_code == 200
        assert md.get(META).status_code == 401
        wait_until(
            lambda: (
                api.get(audit, headers=OPTS).json()["metadata_access"]["tokenless_requests"][
                    "count"
                ]
                == 6
            ),
            timeout=20,
            interval=0.2,
            what="the refused request counted",
        )
    # The owner's or an administrator's; another project's server does not exist; not
    # before 2.109.
    assert api.get(audit, headers=ADMIN).status_code == 200
    stranger = {"X-Auth-Token": "eve:other", **OPTS}
    assert api.get(audit, headers=stranger).status_code == 404
    assert api.get(audit, headers=BEFORE).status_code == 404
    counts = api.get(f"/v2.1/servers/{other.id}/metadata-access", headers=OPTS).json()
    assert counts["metadata_access"]["tokenless_requests"]["count"] == 0


BAD_OPTIONS = [
    {"http_put_response_hop_limit": 0},
    {"http_put_response_hop_limit": 65},
    {"http_put_response_hop_limit": "2"},
    {"http_put_response_hop_limit": True},
    {"http_put_response_hop_limit": 2.5},
    {"http_tokens": "maybe"},
    {"http_endpoint": True},
    {"instance_metadata_tags": "ENABLED"},
    {"http_token": "required"},
    ["http_tokens"],
    "required",
]


def test_bad_options_are_refused_and_change_nothing(
    api: httpx.Client, cloud: Cloud, api_db: Database, cell_db: Database
) -> None:
    server = create_server(api, cloud, "2.109")
    wait_for(api, server["id"], "ACTIVE", version="2.109")
    before = snapshot(api_db, cell_db)
    for options in BAD_OPTIONS:
        responses = [
            put_options(api, server["id"], options),
            api.put(
                "/v2.1/os-metadata-options-defaults/proj",
                headers=ADMIN,
                json={"metadata_options": options},
            ),
            api.post(
                "/v2.1/servers",
                headers=OPTS,
                json={
                    "server": {
                        "name": "x",
                        "imageRef": cloud.image_id,
                        "flavorRef": "1",
                        "networks": "auto",
                        "metadata_options": options,
                    }
                },
            ),
        ]
        for r in responses:
            assert r.status_code == 400, (options, r.text)
            message = r.json()["badRequest"]["message"]
            assert message.startswith("Invalid input for field/attribute"), message
    assert changes(before, snapshot(api_db, cell_db)) == []


def test_other_projects_and_locked_servers(
    api: httpx.Client, cloud: Cloud, api_db: Database, cell_db: Database
) -> None:
    server = create_server(api, cloud, "2.109")
    wait_for(api, server["id"], "ACTIVE", version="2.109")
    before = snapshot(api_db, cell_db)
    stranger = {"X-Auth-Token": "eve:other", **OPTS}
    r = put_options(api, server["id"], {"http_endpoint": "disabled"}, stranger)
    assert r.status_code == 404 and "itemNotFound" in r.json()
    assert (
        api.put(
            "/v2.1/os-metadata-options-defaults/other",
            headers=stranger,
            json={"metadata_options": {"http_tokens": "required"}},
        ).status_code
        == 403
    )
    assert changes(before, snapshot(api_db, cell_db)) == []
    # Locked: the owner's change is a 409, as a key change; an administrator's goes through.
    assert (
        api.post(
            f"/v2.1/servers/{server['id']}/action", headers=ADMIN, json={"lock": None}
        ).status_code
        == 202
    )
    before = snapshot(api_db, cell_db)
    r = put_options(api, server["id"], {"http_endpoint": "disabled"})
    assert r.status_code == 409, r.text
    assert changes(before, snapshot(api_db, cell_db)) == []
    assert put_options(api, server["id"], {"http_endpoint": "disabled"}, ADMIN).status_code == 200
