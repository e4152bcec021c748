"""Hostile requests for the fuzzers (issue 13): a request to any compute API route or
metadata path, drawn with hypothesis from the JSON Schemas the routes declare (valid, or with
one part made hostile: tests/support/fuzzing.py), with hostile headers, queries and path
parameters; sending one, and the shape every refusal must have.

Shared by tests/functional/test_fuzz.py (against a server in the test's process, no database
change allowed for a refusal) and the soak (bench/soak_fuzz.py: against a deployment of real
processes, under load and chaos). ``Targets`` names what the requests refer to.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx
from hypothesis import strategies as st

from cloudseed.api.app import domain_routes
from cloudseed.images import schemas as image_schemas
from cloudseed.keypairs import schemas as keypair_schemas
from cloudseed.servers import schemas as server_schemas
from cloudseed.servers import tags as server_tags
from cloudseed.servers.api import notices as notice_api
from cloudseed.servers.lifecycle import schemas as action_schemas
from cloudseed.servers.live_keys.schemas import PROJECT_KEYS
from cloudseed.servers.metadata_options import schemas as metadata_options_schemas
from cloudseed.servers.notices import rules as notice_rules
from cloudseed.web.microversions import MAX_VERSION, APIVersion
from tests.support.fuzzing import BIG_DIGITS, HOSTILE_STRINGS, dumps, from_schema, spoiled
from tests.support.fuzzing import hostile as hostile_value


@dataclass(frozen=True)
class Targets:
    """The real things requests name: a server and key pair of the requester's (the server is
    never sent a DELETE), images and a network; who the requests say they are; and servers of
    another project, named now and then, which must stay out of the requester's reach."""

    server_id: str
    image_id: str
    image2_id: str
    network_id: str
    key_name: str = "key1"
    tokens: tuple[str, ...] = ("alice:proj", "admin:proj", "bob:other")
    projects: tuple[str, ...] = ("proj", "other", "%00")
    foreign_servers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # None: no body; else JSON-ish (tests/support/fuzzing.py's dumps)

    def text(self) -> str | None:
        return None if self.body is None else dumps(self.body)


ROUTES = sorted(
    {
        (method, route.path)
        for route in domain_routes()
        if "{project_id}" not in route.path  # the same handlers: drawn as a path variant
        for method in sorted(route.methods or ())
        if method != "HEAD"
    }
)
VERSIONS = ["2.1", "2.2", "2.10", "2.19", "2.35", "2.37", "2.54", "2.57", "2.90", "2.94"]
VERSIONS.append(str(MAX_VERSION))
QUERY_NAMES = ["limit", "marker", "all_tenants", "name", "status", "changes-since", "user_id"]
QUERY_NAMES += ["key_name", "sort_key", "sort_dir", "flavor", "image", "length", "deleted"]
QUERY_NAMES += ["tags", "tags-any", "not-tags", "not-tags-any", "notice_seconds"]


def body_schemas(method: str, path: str, version: APIVersion) -> list[dict[str, Any]]:
    s, k = server_schemas, keypair_schemas
    if method == "POST" and path == "/v2.1/servers":
        return [s.create(version)]
    if method == "PUT" and path == "/v2.1/servers/{server_id}":
        return [s.update(version)]
    if path.endswith("/action"):

        def wrap(key: str, schema: dict[str, Any]) -> dict[str, Any]:
            return {"type": "object", "properties": {key: schema}, "required": [key]}

        return [
            s.rebuild(version),
            s.reboot(version),
            wrap("os-stop", {"type": "null"}),
            wrap("os-stop", notice_api.STOP),
            wrap("os-start", {"type": "null"}),
            wrap("os-getConsoleOutput", action_schemas.CONSOLE_OUTPUT),
        ]
    if path.endswith("/metadata"):
        return [s.METADATA_BODY]
    if path.endswith("/metadata/{key}"):
        return [s.METADATA_ITEM_BODY]
    if method == "PUT" and path.endswith("/tags"):
        return [server_tags.REPLACE_BODY]
    if method == "POST" and path.endswith("/os-keypairs"):
        return [k.CREATE_V21, k.CREATE_V22, k.CREATE_V210, k.CREATE_V292]
    if method == "PUT" and path.endswith("/os-project-keys/{id}"):
        return [PROJECT_KEYS]
    if method == "PUT" and path.endswith("/os-metadata-options-defaults/{id}"):
        return [metadata_options_schemas.DEFAULTS_BODY]
    if method == "PUT" and path.endswith("/os-lifecycle-notice-defaults/{id}"):
        return [notice_rules.DEFAULTS_BODY]
    if method == "POST" and path == "/image/v2/images":
        return [image_schemas.CREATE]
    return []


def _path_value(name: str, targets: Targets) -> st.SearchStrategy[str]:
    real = {
        "server_id": targets.server_id,
        "name": targets.key_name,
        "key": "role",
        "flavor_id": "1",
        "image_id": targets.image_id,
        "network_id": targets.network_id,
        "request_id": "req-00000000-0000-0000-0000-000000000000",
    }.get(name, "x")
    others = (
        [st.sampled_from(targets.foreign_servers)]
        if name == "server_id" and targets.foreign_servers
        else []
    )
    return st.one_of(
        st.just(real),
        *others,
        st.uuids().map(str),
        st.sampled_from([s for s in HOSTILE_STRINGS if s and len(s) < 2000]),
        st.text(max_size=20).filter(bool),
    )


def _anchored(body: Any, targets: Targets, keep: bool) -> Any:
    """Real references in a generated body (most of the time), so that requests get past the
    image, flavor, key pair and network lookups to the code behind them."""
    if keep or not isinstance(body, dict):
        return body
    for key, real in (
        ("server", {"imageRef": targets.image_id, "flavorRef": "1", "key_name": targets.key_name}),
        ("rebuild", {"imageRef": targets.image2_id, "key_name": targets.key_name}),
    ):
        inner = body.get(key)
        if isinstance(inner, dict):
            inner = {**inner, **{k: v for k, v in real.items() if k in inner or k != "key_name"}}
            if key == "server":
                inner.pop("block_device_mapping_v2", None)
                if "networks" in inner:
                    inner["networks"] = [{"uuid": targets.network_id}]
                for count in ("min_count", "max_count"):
                    inner.pop(count, None)
            body = {**body, key: inner}
    return body


def _valid(schema: dict[str, Any], targets: Targets) -> st.SearchStrategy[Any]:
    return st.tuples(from_schema(schema), st.integers(0, 4)).map(
        lambda pair: _anchored(pair[0], targets, keep=pair[1] == 4)
    )


@st.composite
def compute_requests(draw: st.DrawFn, method: str, path: str, targets: Targets) -> Request:
    """A request to one compute API route: its path parameters, microversion, headers, query
    and body drawn, real references to ``targets`` most of the time."""
    version_text = draw(st.sampled_from(VERSIONS))
    version = APIVersion.parse(version_text)
    schemas = body_schemas(method, path, version)
    concrete = path
    for name in re.findall(r"\{(\w+)\}", path):
        value = draw(_path_value(name, targets))
        if method == "DELETE" and value in (targets.server_id, targets.image_id):
            value = "00000000-0000-0000-0000-000000000000"  # the others need them
        concrete = concrete.replace("{" + name + "}", quote(value, safe=""))
    if draw(st.booleans()) and concrete.startswith("/v2.1/"):
        project = draw(st.sampled_from(targets.projects))
        concrete = concrete.replace("/v2.1/", f"/v2.1/{project}/", 1)
    headers = {"X-Auth-Token": draw(st.sampled_from(targets.tokens))}
    header_version = f"compute {version_text}"
    if draw(st.integers(0, 9)) == 0:  # now and then a hostile one (most requests get past it)
        header_version = draw(
            st.sampled_from(
                [
                    "compute latest",
                    "compute 3.0",
                    "compute 2.999",
                    "compute 2." + "9" * 5000,
                    "compute",
                    "volume 2.5",
                    "compute 2.1, compute 2.5",
                    "compute \x7f",
                    "",
                    "compute 2.1, " + "x" * 9000,
                ]
            )
        )
    headers["OpenStack-API-Version"] = header_version
    if draw(st.booleans()):
        headers["X-OpenStack-Nova-API-Version"] = draw(st.sampled_from(["2.1", "2.50", "x", ""]))
    body: Any = None
    if method in ("POST", "PUT"):
        if schemas:
            body = draw(
                st.one_of(
                    *[spoiled(_valid(s, targets)) for s in schemas * 4],
                    hostile_value(),
                )
            )
        else:
            body = draw(st.one_of(st.none(), hostile_value()))
        headers["Content-Type"] = draw(
            st.sampled_from(
                [
                    "application/json",
                    "application/json",
                    "application/json",
                    "application/json; charset=latin-1",
                    "text/plain",
                    "application/vnd.openstack.compute+json",
                    "multipart/form-data; boundary=x",
                    "application/octet-stream",
                ]
            )
        )
    query = draw(
        st.dictionaries(
            st.sampled_from(QUERY_NAMES),
            st.one_of(
                st.sampled_from(["1", "0", "-1", "true", "", BIG_DIGITS, "2020-01-01T00:00:00"]),
                st.text(max_size=10),
            ),
            max_size=3,
        )
    )
    return Request(method, concrete, query, headers, body)


def quote(text: str, *, safe: str) -> str:
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe=safe)


def send(client: httpx.Client, request: Request) -> httpx.Response:
    text = request.text()
    return client.request(
        request.method,
        request.path,
        params=request.query,
        headers=request.headers,
        content=None if text is None else text.encode("utf-8", "surrogatepass"),
    )


# The HTTP parser's own answer to a request it cannot read (before any app code), as any web
# server in front of Nova would give.
PARSER_REJECTION = (400, "Invalid HTTP request received.")
# The head limits' answers ([wsgi] max_request_line, max_header_line, max_header_size), also
# given before any app code reads the request (docs/api-differences.md, "Edge").
HEAD_LIMIT_REJECTIONS = {(414, "URI Too Long\n"), (431, "Request Header Fields Too Large\n")}


def check_fault(response: httpx.Response) -> None:
    """Assert that a 4xx answer is a Nova fault (Glance's body under ``/image/``), or the
    HTTP parser's or the head limits' own answer."""
    answer = (response.status_code, response.text)
    if answer == PARSER_REJECTION or answer in HEAD_LIMIT_REJECTIONS:
        return
    try:
        body = response.json()
    except ValueError as exc:
        status, text = response.status_code, response.text[:300]
        raise AssertionError(f"not a Nova fault: {status} {text!r}") from exc
    if response.url.path.startswith("/image/"):  # the Glance slice: Glance's body
        assert isinstance(body, dict) and set(body) == {"message", "code", "title"}, body
        assert body["code"] == f"{response.status_code} {body['title']}", body
        assert isinstance(body["message"], str), body
        return
    assert isinstance(body, dict) and len(body) == 1, body
    ((name, fault),) = body.items()
    assert isinstance(name, str) and isinstance(fault, dict), body
    assert fault.get("code") == response.status_code, body
    assert isinstance(fault.get("message"), str), body


METADATA_PATHS = [
    "/",
    "/openstack",
    "/openstack/latest",
    "/openstack/latest/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/vendor_data.json",
    "/openstack/latest/vendor_data2.json",
    "/openstack/latest/network_data.json",
    "/openstack/latest/password",
    "/openstack/latest/phone_home",
    "/openstack/latest/boot_report",
    "/openstack/latest/authorized_keys",
    "/openstack/latest/authorized_keys?user=root",
    "/openstack/2012-08-10/meta_data.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/meta-data/placement/availability-zone",
    "/latest/user-data",
    "/2009-04-04/meta-data/instance-id",
    "/latest/api/token",
    "/latest/dynamic/instance-identity/document",
    "/latest/dynamic/instance-identity/pkcs7",
    "/2009-04-04/dynamic/instance-identity/signature",
    "/openstack/latest/identity_token",
    "/openstack/latest/identity_token?audience=vault",
]


@st.composite
def metadata_requests(draw: st.DrawFn) -> Request:
    """A request to the metadata service: a path of either tree, now and then with a hostile
    segment or audience, a method, identification headers and a body drawn."""
    path = draw(st.sampled_from(METADATA_PATHS))
    if draw(st.booleans()):
        extra = draw(st.sampled_from([s for s in HOSTILE_STRINGS if len(s) < 2000]))
        path = path.rstrip("/") + "/" + quote(extra, safe="/")
    elif "?" not in path and draw(st.booleans()):
        extra = draw(st.sampled_from([s for s in HOSTILE_STRINGS if len(s) < 2000]))
        path += "?audience=" + quote(extra, safe="")
    method = draw(st.sampled_from(["GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]))
    headers: dict[str, str] = {}
    for name in draw(
        st.lists(
            st.sampled_from(
                [
                    "X-Forwarded-For",
                    "Forwarded",
                    "X-Instance-ID",
                    "X-Instance-ID-Signature",
                    "X-Tenant-ID",
                    "X-Metadata-Provider",
                    "X-aws-ec2-metadata-token",
                    "X-aws-ec2-metadata-token-ttl-seconds",
                    "Content-Type",
                ]
            ),
            max_size=3,
            unique=True,
        )
    ):
        headers[name] = draw(
            st.sampled_from(
                [
                    "127.0.0.2",
                    "10.0.0.3",
                    "for=127.0.0.3",
                    "",
                    "0",
                    "21600",
                    "-1",
                    "x" * 300,
                    BIG_DIGITS,
                ]
            )
        )
    body = None
    if method in ("POST", "PUT"):
        body = draw(st.one_of(st.text(max_size=300), hostile_value().map(dumps), st.just("")))
    return Request(method, path, {}, headers, body)
