"""The compute API's edge: discovery, microversions, faults, bodies and authentication."""

from __future__ import annotations

import httpx
import pytest

from cloudseed.web.microversions import MAX_VERSION

pytestmark = pytest.mark.usefixtures("clean_api_db")


@pytest.fixture()
def anon(api_url):
    with httpx.Client(base_url=api_url, timeout=30) as client:
        yield client


def test_root_version_document(anon, api_url):
    r = anon.get("/")
    assert r.status_code == 200
    assert r.json() == {
        "versions": [
            {
                "id": "v2.1",
                "status": "CURRENT",
                "version": str(MAX_VERSION),
                "min_version": "2.1",
                "updated": "2013-07-23T11:33:21Z",
                "links": [{"rel": "self", "href": f"{api_url}/v2.1/"}],
            }
        ]
    }
    assert "OpenStack-API-Version" not in r.headers  # the root is not microversioned


@pytest.mark.parametrize("path", ["/v2.1", "/v2.1/"])
def test_v21_version_document_without_token(anon, api_url, path):
    r = anon.get(path)
    assert r.status_code == 200
    version = r.json()["version"]
    assert (version["id"], version["min_version"], version["version"]) == (
        "v2.1",
        "2.1",
        str(MAX_VERSION),
    )
    assert version["links"][0] == {"rel": "self", "href": f"{api_url}/v2.1/"}
    assert version["media-types"][0]["type"] == (
        "application/vnd.openstack.compute+json;version=2.1"
    )


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({}, "2.1"),
        ({"OpenStack-API-Version": "compute 2.35"}, "2.35"),
        ({"X-OpenStack-Nova-API-Version": "2.10"}, "2.10"),
        ({"OpenStack-API-Version": "compute 2.20", "X-OpenStack-Nova-API-Version": "2.10"}, "2.20"),
        ({"OpenStack-API-Version": "placement 1.3, compute 2.11"}, "2.11"),
        ({"OpenStack-API-Version": "compute latest"}, str(MAX_VERSION)),
        ({"X-OpenStack-Nova-API-Version": "latest"}, str(MAX_VERSION)),
    ],
)
def test_microversion_negotiation(api, headers, expected):
    r = api.get("/v2.1/os-keypairs", headers=headers)
    assert r.status_code == 200
    assert r.headers["OpenStack-API-Version"] == f"compute {expected}"
    assert r.headers["X-OpenStack-Nova-API-Version"] == expected
    assert r.headers["Vary"] == "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
    assert r.headers["x-openstack-request-id"].startswith("req-")
    assert r.headers["x-compute-request-id"] == r.headers["x-openstack-request-id"]


@pytest.mark.parametrize("value", ["3.0", "2.999", "1.1"])
def test_version_out_of_range_is_406(api, value):
    r = api.get("/v2.1/os-keypairs", headers={"OpenStack-API-Version": f"compute {value}"})
    assert r.status_code == 406
    assert r.json() == {
        "computeFault": {
            "code": 406,
            "message": (
                f"Version {value} is not supported by the API. Minimum is 2.1 and maximum is "
                f"{MAX_VERSION}."
            ),
        }
    }


@pytest.mark.parametrize("value", ["2", "2.01", "abc", "2.1.1"])
def test_malformed_version_is_400(api, value):
    r = api.get("/v2.1/os-keypairs", headers={"X-OpenStack-Nova-API-Version": value})
    assert r.status_code == 400
    assert r.json()["badRequest"]["message"] == (
        f"API Version String {value} is of invalid format. Must be of format MajorNum.MinorNum."
    )


def test_error_responses_carry_version_headers(api):
    r = api.get("/v2.1/os-keypairs/nope", headers={"OpenStack-API-Version": "compute 2.50"})
    assert r.status_code == 404
    assert r.headers["OpenStack-API-Version"] == "compute 2.50"
    assert r.headers["content-type"].startswith("application/json")


def test_missing_token_is_401(anon):
    r = anon.get("/v2.1/os-keypairs")
    assert r.status_code == 401
    assert r.json() == {"unauthorized": {"code": 401, "message": "Authentication required"}}


def test_unknown_path_and_method(api):
    r = api.get("/v2.1/os-nothing")
    assert r.status_code == 404
    assert r.json() == {
        "itemNotFound": {"code": 404, "message": "The resource could not be found."}
    }
    r = api.put("/v2.1/os-keypairs", json={})
    assert r.status_code == 405
    assert r.json() == {
        "badMethod": {"code": 405, "message": "The method is not allowed for the requested URL."}
    }
    # One route per method at this URL: Allow names every one of them.
    assert r.headers["allow"] == "GET, HEAD, POST"
    assert api.patch("/v2.1/servers/x/metadata").headers["allow"] == "GET, HEAD, POST, PUT"


@pytest.mark.parametrize(
    "content, content_type",
    [
        (b"{not json", "application/json"),
        (b"[1, 2", None),
    ],
)
def test_malformed_body(api, content, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    r = api.post("/v2.1/os-keypairs", content=content, headers=headers)
    assert r.status_code == 400
    assert r.json() == {"badRequest": {"code": 400, "message": "Malformed request body"}}


def test_wrong_content_type_is_415(api):
    r = api.post(
        "/v2.1/os-keypairs",
        content=b"name=k1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 415
    assert r.json() == {"badMediaType": {"code": 415, "message": "Unsupported Content-Type"}}


def test_text_plain_is_read_as_json_like_nova(api):
    r = api.post(
        "/v2.1/os-keypairs",
        content=b'{"keypair": {"name": "k1"}}',
        headers={"Content-Type": "text/plain"},
    )
    assert r.status_code == 200  # generated, at 2.1


def test_empty_and_wrong_shaped_bodies(api):
    r = api.post("/v2.1/os-keypairs", content=b"")
    assert r.status_code == 400
    assert r.json()["badRequest"]["message"] == "'keypair' is a required property"
    r = api.post("/v2.1/os-keypairs", json=[1, 2])
    assert r.status_code == 400
    assert "is not of type 'object'" in r.json()["badRequest"]["message"]


def test_oversized_body_is_413(api, migrated_settings):
    limit = migrated_settings.oslo_middleware.max_request_body_size
    big = b'{"keypair": {"name": "k", "public_key": "' + b"A" * limit + b'"}}'
    r = api.post("/v2.1/os-keypairs", content=big)
    assert r.status_code == 413
    assert r.json() == {"overLimit": {"code": 413, "message": "Request is too large."}}
    # The unread rest of the body must not become the next request on this connection.
    assert r.headers["connection"] == "close"

    def chunks():  # no Content-Length: the limit is enforced while reading
        yield big[: limit // 2]
        yield big[limit // 2 :]

    r = api.post("/v2.1/os-keypairs", content=chunks())
    assert r.status_code == 413
    assert api.get("/v2.1/os-keypairs").json() == {"keypairs": []}


def test_healthz(anon):
    r = anon.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def _fault_of(r: httpx.Response) -> tuple[str, int, str]:
    """The one fault in a Nova fault body, after checking the shape every error path shares."""
    assert r.headers["content-type"] == "application/json; charset=UTF-8"
    assert r.headers["x-openstack-request-id"].startswith("req-")
    body = r.json()
    assert len(body) == 1
    [(name, fault)] = body.items()
    assert set(fault) == {"code", "message"} and fault["code"] == r.status_code
    return name, fault["code"], fault["message"]


def test_every_error_path_answers_a_nova_fault(api, anon):
    """Errors raised before routing (auth, microversion), by Starlette's router (404, 405),
    by validation and by the domains all come out in the same shape, from web/faults.py."""
    api.post("/v2.1/os-keypairs", json={"keypair": {"name": "k1"}})
    v210 = {"OpenStack-API-Version": "compute 2.10"}
    answers = {
        "auth": anon.get("/v2.1/os-keypairs"),
        "version": api.get("/v2.1/os-keypairs", headers={"OpenStack-API-Version": "compute 9.9"}),
        "no route": api.get("/v2.1/os-nothing"),
        "method": api.delete("/v2.1/os-keypairs"),
        "body": api.post("/v2.1/os-keypairs", content=b"{"),
        "schema": api.post("/v2.1/os-keypairs", json={"keypair": {}}),
        "media type": api.post(
            "/v2.1/os-keypairs", content=b"{}", headers={"Content-Type": "image/png"}
        ),
        "policy": api.get("/v2.1/os-keypairs?user_id=bob", headers=v210),
        "not found": api.get("/v2.1/os-keypairs/nope"),
        "conflict": api.post("/v2.1/os-keypairs", json={"keypair": {"name": "k1"}}),
        "project in URL": api.get("/v2.1/other-project/os-keypairs"),
    }
    faults = {what: _fault_of(r)[:2] for what, r in answers.items()}
    assert faults == {
        "auth": ("unauthorized", 401),
        "version": ("computeFault", 406),
        "no route": ("itemNotFound", 404),
        "method": ("badMethod", 405),
        "body": ("badRequest", 400),
        "schema": ("badRequest", 400),
        "media type": ("badMediaType", 415),
        "policy": ("forbidden", 403),
        "not found": ("itemNotFound", 404),
        "conflict": ("conflictingRequest", 409),
        "project in URL": ("badRequest", 400),
    }
    assert answers["auth"].headers["www-authenticate"] == "Keystone uri=''"


def test_a_plain_v21_path_is_never_read_as_a_project_id(api):
    """Every domain answers under /v2.1 and /v2.1/{project_id}; the plain routes match first,
    so "flavors" here is the flavors collection, not a project whose servers are listed."""
    r = api.get("/v2.1/flavors/servers")
    assert r.status_code == 404
    assert r.json()["itemNotFound"]["message"] == "Flavor servers could not be found."
    assert api.get("/v2.1/proj/servers").json() == {"servers": []}
