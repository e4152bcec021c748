"""The rule at the edge (issue 13): every request is validated completely before any write, so
a rejected request answers a Nova-shaped 400 (never a 500) and no row of any table changed.

Bodies are sent as JSON text with ``\\ud800`` escapes (httpx's own encoder cannot encode a lone
surrogate), as an attacker's client would send them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.snapshot import changes, snapshot

LONE = "\ud800"
HUGE = "9" * 5000  # more digits than Python's int() accepts (4,300)


def _create(cloud: Cloud, **fields: Any) -> dict[str, Any]:
    return {"server": {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", **fields}}


def _rebuild(cloud: Cloud, **fields: Any) -> dict[str, Any]:
    return {"rebuild": {"imageRef": cloud.image2_id, **fields}}


# (id, method, path, body(cloud) or None, extra headers, expected status)
CASES: list[tuple[str, str, str, Any, dict[str, str], int]] = [
    ("create-adminPass", "POST", "/servers", lambda c: _create(c, adminPass=LONE), {}, 400),
    ("create-name", "POST", "/servers", lambda c: _create(c, name="a" + LONE), {}, 400),
    (
        "create-metadata-value",
        "POST",
        "/servers",
        lambda c: _create(c, metadata={"k": LONE}),
        {},
        400,
    ),
    (
        "create-metadata-key",
        "POST",
        "/servers",
        lambda c: _create(c, metadata={LONE: "v"}),
        {},
        400,
    ),
    (
        "create-description",
        "POST",
        "/servers",
        lambda c: _create(c, description=LONE),
        mv("2.19"),
        400,
    ),
    ("create-imageRef", "POST", "/servers", lambda c: _create(c, imageRef=LONE), {}, 400),
    ("create-flavorRef", "POST", "/servers", lambda c: _create(c, flavorRef=LONE), {}, 400),
    (
        "create-network-uuid",
        "POST",
        "/servers",
        lambda c: _create(c, networks=[{"uuid": LONE}]),
        {},
        400,
    ),
    (
        "create-unknown-key",
        "POST",
        "/servers",
        lambda c: {"server": {**_create(c)["server"]}, LONE: 1},
        {},
        400,
    ),
    ("create-min_count-0", "POST", "/servers", lambda c: _create(c, min_count="0"), {}, 400),
    ("create-max_count-0", "POST", "/servers", lambda c: _create(c, max_count="0"), {}, 400),
    ("create-max_count-huge", "POST", "/servers", lambda c: _create(c, max_count=HUGE), {}, 400),
    ("create-min_count-huge", "POST", "/servers", lambda c: _create(c, min_count=HUGE), {}, 400),
    (
        "create-max_count-20-digits",
        "POST",
        "/servers",
        lambda c: _create(c, max_count="9" * 20),
        {},
        400,
    ),
    (
        "rebuild-adminPass",
        "POST",
        "/servers/{id}/action",
        lambda c: _rebuild(c, name="renamed", adminPass=LONE),
        {},
        400,
    ),
    (
        "rebuild-metadata",
        "POST",
        "/servers/{id}/action",
        lambda c: _rebuild(c, name="renamed", metadata={"k": LONE}),
        {},
        400,
    ),
    (
        "rebuild-key_name",
        "POST",
        "/servers/{id}/action",
        lambda c: _rebuild(c, name="renamed", key_name=LONE),
        mv("2.54"),
        400,
    ),
    ("update-name", "PUT", "/servers/{id}", lambda c: {"server": {"name": LONE}}, {}, 400),
    (
        "metadata-item-put",
        "PUT",
        "/servers/{id}/metadata/k",
        lambda c: {"meta": {"k": LONE}},
        {},
        400,
    ),
    ("metadata-put", "PUT", "/servers/{id}/metadata", lambda c: {"metadata": {"k": LONE}}, {}, 400),
    (
        "metadata-post",
        "POST",
        "/servers/{id}/metadata",
        lambda c: {"metadata": {"k": LONE}},
        {},
        400,
    ),
    (
        "console-length-huge",
        "POST",
        "/servers/{id}/action",
        lambda c: {"os-getConsoleOutput": {"length": HUGE}},
        {},
        400,
    ),
    (
        "console-length-negative-huge",
        "POST",
        "/servers/{id}/action",
        lambda c: {"os-getConsoleOutput": {"length": "-" + HUGE}},
        {},
        400,
    ),
    (
        "keypair-name",
        "POST",
        "/os-keypairs",
        lambda c: {"keypair": {"name": "k" + LONE}},
        {},
        400,
    ),
    ("keypairs-limit-huge", "GET", "/os-keypairs?limit=" + HUGE, None, mv("2.35"), 400),
    ("servers-limit-huge", "GET", "/servers?limit=" + HUGE, None, {}, 400),
    (
        "version-header-huge",
        "GET",
        "/servers",
        None,
        {"OpenStack-API-Version": f"compute 2.{HUGE}"},
        400,
    ),
    (
        "legacy-version-header-huge",
        "GET",
        "/servers",
        None,
        {"X-OpenStack-Nova-API-Version": f"{HUGE}.1"},
        400,
    ),
    (
        "version-header-huge-unauthenticated",
        "GET",
        "/servers",
        None,
        {"OpenStack-API-Version": f"compute {HUGE}.1", "X-Auth-Token": ""},
        400,
    ),
    ("path-invalid-utf8", "GET", "/servers/%ED%A0%80", None, {}, 404),
    ("path-invalid-utf8-delete", "DELETE", "/servers/%ED%A0%80", None, {}, 404),
]


@pytest.mark.parametrize(
    ("method", "path", "make_body", "headers", "status"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_rejected_request_changes_nothing(
    api: httpx.Client, cloud, api_db, cell_db, method, path, make_body, headers, status
):
    server = create_server(api, cloud, key_name="key1")
    wait_for(api, server["id"], "ACTIVE")
    content = None if make_body is None else json.dumps(make_body(cloud)).encode()
    before = snapshot(api_db, cell_db)
    r = api.request(
        method,
        "/v2.1" + path.format(id=server["id"]),
        content=content,
        headers={"Content-Type": "application/json", **headers},
    )
    assert r.status_code == status, r.text
    fault = r.json()
    (name,) = fault
    assert fault[name]["code"] == status
    assert isinstance(fault[name]["message"], str) and fault[name]["message"]
    assert changes(before, snapshot(api_db, cell_db)) == []


def test_rejected_rebuild_keeps_the_server(api, cloud):
    """The rebuild of issue 13 answered 500 yet ran and renamed the server."""
    server = create_server(api, cloud)
    wait_for(api, server["id"], "ACTIVE")
    body = json.dumps(_rebuild(cloud, name="renamed", adminPass=LONE))
    r = api.post(f"/v2.1/servers/{server['id']}/action", content=body)
    assert r.status_code == 400, r.text
    shown = api.get(f"/v2.1/servers/{server['id']}").json()["server"]
    assert shown["name"] == "vm" and shown["image"]["id"] == cloud.image_id


def test_accepted_numbers_still_work(api, cloud):
    """The bounds refuse nothing Nova's schemas accept and a cloud can serve."""
    server = create_server(api, cloud, min_count="1", max_count=1)
    wait_for(api, server["id"], "ACTIVE")
    r = api.post(
        f"/v2.1/servers/{server['id']}/action",
        json={"os-getConsoleOutput": {"length": "-1"}},
    )
    assert r.status_code == 200, r.text
    r = api.get("/v2.1/os-keypairs?limit=00000000000000000001", headers=mv("2.35"))
    assert r.status_code == 200 and len(r.json()["keypairs"]) == 1, r.text
    r = api.get("/v2.1/servers", headers={"OpenStack-API-Version": "compute 2.000000001"})
    assert r.status_code == 400  # leading zeros are no version (Nova's regex), as before
