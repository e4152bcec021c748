"""A NUL character anywhere a client's text goes (a path, a query, a JSON string or key) is a 400,
on every backend, and nothing is written. PostgreSQL can neither store nor compare text holding
one (psycopg refuses to send it), so on PostgreSQL each of these was a 500, while SQLite
answered 404 or stored the value. Found by the soak's fuzzer (bench/soak.py, issue 30), which
sends the suite's hostile requests to a deployment on PostgreSQL; tests/functional/test_fuzz.py
runs on SQLite only."""

from __future__ import annotations

import pytest

from tests.support.snapshot import changes, snapshot

LIVE = {"OpenStack-API-Version": "compute 2.106"}
PATHS = [
    "/v2.1/servers/a%00b",
    "/v2.1/servers/a%00b/os-instance-actions",
    "/v2.1/os-keypairs/a%00b",
    "/v2.1/flavors/a%00b",
    "/v2.1/images/a%00b",
    "/v2.1/servers?image=a%00b",
    "/v2.1/servers?marker=a%00b",
    "/v2.1/os-keypairs?marker=a%00b",
    "/image/v2/images/a%00b",
    "/network/v2.0/networks/a%00b",
]


@pytest.mark.parametrize("path", PATHS)
def test_a_nul_in_the_path_or_query_is_a_400(api, cloud, path):
    r = api.get(path)
    assert r.status_code == 400, r.text
    if path.startswith("/image/"):
        assert "NUL" in r.json()["message"]
    else:
        assert "NUL" in r.json()["badRequest"]["message"]


def test_a_nul_in_a_delete_path_changes_nothing(api, cloud, api_db, cell_db):
    before = snapshot(api_db, cell_db)
    r = api.delete("/v2.1/os-keypairs/key1%00")
    assert r.status_code == 400, r.text
    assert changes(before, snapshot(api_db, cell_db)) == []


@pytest.mark.parametrize(
    "fields",
    [
        {"metadata": {"role": "a\x00b"}},
        {"metadata": {"a\x00b": "web"}},
        {"imageRef": "a\x00b"},
        {"flavorRef": "a\x00b"},
        {"adminPass": "a\x00b"},
    ],
    ids=["metadata value", "metadata key", "imageRef", "flavorRef", "adminPass"],
)
def test_a_nul_in_a_body_is_a_400_and_nothing_is_written(api, cloud, api_db, cell_db, fields):
    body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", "networks": "auto"}
    before = snapshot(api_db, cell_db)
    r = api.post("/v2.1/servers", json={"server": {**body, **fields}}, headers=LIVE)
    assert r.status_code == 400, r.text
    assert "NUL" in r.json()["badRequest"]["message"]
    assert changes(before, snapshot(api_db, cell_db)) == []
