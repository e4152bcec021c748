"""The spoofing matrix (docs/metadata.md, "Who is asking"): every way a guest might pass itself
off as another, each a named test against a real metadata service on a loopback port.

Guests are instances on 127.0.0.0/24 and connect from their own address; ``127.0.0.250`` is the
trusted proxy. In each cell the attacker is guest A (the address the proxy appends, or the one
that connects) and the victim is guest D, whose user data is a secret. A cell's expectation is
the guest that answers (``"A"``, ``"D"``) or the status.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from cloudseed.signing import sign
from tests.support.cloud import Cloud, b64
from tests.support.guests import SECRET, Guest, MetadataServer, boot
from tests.support.server import running_metadata, with_options
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

PROXY = Guest("proxy", "127.0.0.250", "")
META = "/openstack/latest/meta_data.json"
TTL = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
NEUTRON = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})
Cell = tuple[str, list[tuple[str, str]], Any]


@pytest.fixture()
def pair(api: httpx.Client, cloud: Cloud) -> dict[str, Guest]:
    return {"A": boot(api, cloud), "D": boot(api, cloud, user_data=b64("D's secret"))}


def fill(headers: list[tuple[str, str]], guests: dict[str, Guest]) -> list[tuple[str, str]]:
    names = {"A": guests["A"].address, "D": guests["D"].address}
    for name in ("A", "D"):
        names[f"{name}_id"] = guests[name].id
        names[f"{name}_sig"] = sign(SECRET, guests[name].id)
    return [(k, v.format(**names)) for k, v in headers]


def who(response: httpx.Response, guests: dict[str, Guest]) -> Any:
    """The guest whose data came back ("A", "D"), or the status of a refusal."""
    if response.status_code != 200:
        return response.status_code
    uuid = response.json()["uuid"]
    return next(name for name, g in guests.items() if g.id == uuid)


def ask(url: str, source: Guest | None, headers: list[tuple[str, str]], guests: Any) -> Any:
    transport = httpx.HTTPTransport(local_address=source.address) if source else None
    with httpx.Client(base_url=url, timeout=10, transport=transport) as md:
        return who(md.get(META, headers=fill(headers, guests)), guests)


@pytest.fixture()
def ip_mode(migrated_settings: Settings, api_db: Database) -> Iterator[Any]:
    """Start a service in IP mode with 127.0.0.250 trusted and ``forwarded_header``."""

    def start(header: str = "x-forwarded-for", **more: Any) -> Any:
        settings = with_options(
            migrated_settings,
            "metadata",
            trusted_proxies="127.0.0.250",
            forwarded_header=header,
            **more,
        )
        return running_metadata(settings, api_db=api_db)

    yield start


# -- the source address: a guest's own headers mean nothing -----------------------------------

DIRECT: list[Cell] = [
    ("no-headers", [], "A"),
    ("x-forwarded-for-victim", [("X-Forwarded-For", "{D}")], "A"),
    ("forwarded-victim", [("Forwarded", "for={D}")], "A"),
    ("both-victim", [("X-Forwarded-For", "{D}"), ("Forwarded", "for={D}")], "A"),
    ("x-forwarded-for-chain", [("X-Forwarded-For", "{D}, {D}")], "A"),
    (
        "signed-headers-of-victim",
        [
            ("X-Instance-ID", "{D_id}"),
            ("X-Tenant-ID", "proj"),
            ("X-Instance-ID-Signature", "{D_sig}"),
        ],
        "A",
    ),
    ("provider-header", [("X-Metadata-Provider", "loop"), ("X-Forwarded-For", "{D}")], "A"),
]


@pytest.mark.parametrize(("name", "headers", "expected"), DIRECT, ids=[c[0] for c in DIRECT])
def test_direct_guest(
    name: str, headers: list[tuple[str, str]], expected: Any, pair: dict[str, Guest], ip_mode: Any
) -> None:
    with ip_mode() as url:
        assert ask(url, pair["A"], headers, pair) == expected


# -- through the trusted proxy, which sets X-Forwarded-For (the default) ----------------------

VIA_XFF: list[Cell] = [
    ("x-forwarded-for-only", [("X-Forwarded-For", "{A}")], "A"),
    ("no-header-is-the-proxy-itself", [], 404),
    ("forwarded-only-is-the-guests-own", [("Forwarded", "for={D}")], 404),
    # The case: the proxy set X-Forwarded-For, the guest's Forwarded came along.
    ("both-headers-never-merged", [("X-Forwarded-For", "{A}"), ("Forwarded", "for={D}")], "A"),
    ("both-headers-forwarded-first", [("Forwarded", "for={D}"), ("X-Forwarded-For", "{A}")], "A"),
    ("guest-prepended-hop", [("X-Forwarded-For", "{D}, {A}")], "A"),
    (
        "guest-x-forwarded-for-line-first",
        [("X-Forwarded-For", "{D}"), ("X-Forwarded-For", "{A}")],
        "A",
    ),
    (
        "several-forwarded-lines",
        [("Forwarded", "for={D}"), ("Forwarded", "for={D}"), ("X-Forwarded-For", "{A}")],
        "A",
    ),
    ("trusted-hop-after-the-guest", [("X-Forwarded-For", "{D}, {A}, 127.0.0.250")], "A"),
    ("address-with-port", [("X-Forwarded-For", "{D}, {A}:4711")], "A"),
    ("garbage-last-hop", [("X-Forwarded-For", "{D}, not-an-address")], 404),
    ("ipv6-last-hop", [("X-Forwarded-For", "{D}, 2001:db8::1")], 404),
    ("ipv6-bracketed-with-port", [("X-Forwarded-For", "{D}, [2001:db8::1]:4711")], 404),
    ("ipv4-mapped-ipv6-is-not-the-guest", [("X-Forwarded-For", "{D}, ::ffff:{A}")], 404),
    ("empty-last-hop", [("X-Forwarded-For", "{D},")], 404),
    ("empty-header", [("X-Forwarded-For", "")], 404),
]


@pytest.mark.parametrize(("name", "headers", "expected"), VIA_XFF, ids=[c[0] for c in VIA_XFF])
def test_trusted_proxy_x_forwarded_for(
    name: str, headers: list[tuple[str, str]], expected: Any, pair: dict[str, Guest], ip_mode: Any
) -> None:
    with ip_mode() as url:
        assert ask(url, PROXY, headers, pair) == expected


# -- through a trusted proxy that sets Forwarded (forwarded_header = forwarded) ---------------

VIA_FORWARDED: list[Cell] = [
    ("forwarded-only", [("Forwarded", "for={A}")], "A"),
    ("x-forwarded-for-only-is-the-guests-own", [("X-Forwarded-For", "{D}")], 404),
    ("both-headers-never-merged", [("X-Forwarded-For", "{D}"), ("Forwarded", "for={A}")], "A"),
    ("guest-prepended-element", [("Forwarded", "for={D}, for={A}")], "A"),
    (
        "guest-forwarded-line-first",
        [("Forwarded", "for={D}"), ("Forwarded", "for={A};proto=http")],
        "A",
    ),
    ("quoted-with-port", [("Forwarded", 'for="{D}", for="{A}:4711"')], "A"),
    ("ipv6-quoted-with-port", [("Forwarded", 'for={D}, for="[2001:db8::1]:4711"')], 404),
    ("last-element-without-for", [("Forwarded", "for={D}, proto=http")], 404),
    ("obfuscated-identifier", [("Forwarded", "for={D}, for=_hidden")], 404),
]


@pytest.mark.parametrize(
    ("name", "headers", "expected"), VIA_FORWARDED, ids=[c[0] for c in VIA_FORWARDED]
)
def test_trusted_proxy_forwarded(
    name: str, headers: list[tuple[str, str]], expected: Any, pair: dict[str, Guest], ip_mode: Any
) -> None:
    with ip_mode("forwarded") as url:
        assert ask(url, PROXY, headers, pair) == expected


# -- signed headers (a Neutron metadata proxy) ------------------------------------------------

SIGNED: list[Cell] = [
    (
        "valid",
        [
            ("X-Instance-ID", "{A_id}"),
            ("X-Tenant-ID", "proj"),
            ("X-Instance-ID-Signature", "{A_sig}"),
        ],
        "A",
    ),
    ("signature-missing", [("X-Instance-ID", "{D_id}"), ("X-Tenant-ID", "proj")], 400),
    (
        "signature-wrong",
        [
            ("X-Instance-ID", "{D_id}"),
            ("X-Tenant-ID", "proj"),
            ("X-Instance-ID-Signature", "00" * 32),
        ],
        403,
    ),
    (
        "another-instances-signature",
        [
            ("X-Instance-ID", "{D_id}"),
            ("X-Tenant-ID", "proj"),
            ("X-Instance-ID-Signature", "{A_sig}"),
        ],
        403,
    ),
    (
        "tenant-mismatched",
        [
            ("X-Instance-ID", "{D_id}"),
            ("X-Tenant-ID", "other"),
            ("X-Instance-ID-Signature", "{D_sig}"),
        ],
        404,
    ),
    ("tenant-missing", [("X-Instance-ID", "{D_id}"), ("X-Instance-ID-Signature", "{D_sig}")], 400),
    (
        "two-instance-ids",
        [
            ("X-Instance-ID", "{A_id}"),
            ("X-Instance-ID", "{D_id}"),
            ("X-Tenant-ID", "proj"),
            ("X-Instance-ID-Signature", "{A_sig}"),
        ],
        400,
    ),
    ("source-address-means-nothing", [], 400),
]


@pytest.mark.parametrize(("name", "headers", "expected"), SIGNED, ids=[c[0] for c in SIGNED])
def test_signed_headers(
    name: str,
    headers: list[tuple[str, str]],
    expected: Any,
    pair: dict[str, Guest],
    metadata_server: MetadataServer,
) -> None:
    with metadata_server(NEUTRON) as url:
        assert ask(url, pair["D"], headers, pair) == expected


def test_signed_headers_local_ipv4_is_the_appended_address(
    pair: dict[str, Guest],
    metadata_server: MetadataServer,
) -> None:
    headers = [
        ("X-Instance-ID", "{A_id}"),
        ("X-Tenant-ID", "proj"),
        ("X-Instance-ID-Signature", "{A_sig}"),
        ("X-Forwarded-For", "{D}, {A}"),
    ]
    with metadata_server(NEUTRON) as url, httpx.Client(base_url=url, timeout=10) as md:
        r = md.get("/latest/meta-data/local-ipv4", headers=fill(headers, pair))
        assert r.text == pair["A"].address


# -- provider mode (X-Metadata-Provider + X-Forwarded-For) ------------------------------------

PROVIDER: list[Cell] = [
    ("signed", [("X-Forwarded-For", "{A}")], "A"),
    ("guest-prepended-hop", [("X-Forwarded-For", "{D}, {A}")], "A"),
    (
        "guest-x-forwarded-for-line-first",
        [("X-Forwarded-For", "{D}"), ("X-Forwarded-For", "{A}")],
        "A",
    ),
    ("guest-forwarded-ignored", [("Forwarded", "for={D}"), ("X-Forwarded-For", "{A}")], "A"),
    ("address-missing", [("Forwarded", "for={D}")], 400),
]


@pytest.mark.parametrize(("name", "headers", "expected"), PROVIDER, ids=[c[0] for c in PROVIDER])
def test_provider_mode(
    name: str,
    headers: list[tuple[str, str]],
    expected: Any,
    pair: dict[str, Guest],
    cloud: Cloud,
    metadata_server: MetadataServer,
) -> None:
    provider = [
        ("X-Metadata-Provider", cloud.network_id),
        ("X-Metadata-Provider-Signature", sign(SECRET, cloud.network_id)),
    ]
    with metadata_server(NEUTRON) as url:
        assert ask(url, None, provider + headers, pair) == expected


@pytest.mark.parametrize("signature", ["missing", "wrong"])
def test_provider_mode_unsigned_with_a_secret(
    signature: str,
    pair: dict[str, Guest],
    cloud: Cloud,
    metadata_server: MetadataServer,
) -> None:
    headers = [("X-Metadata-Provider", cloud.network_id), ("X-Forwarded-For", "{D}")]
    if signature == "wrong":
        headers.append(("X-Metadata-Provider-Signature", sign("wrong", cloud.network_id)))
    with metadata_server(NEUTRON) as url:
        assert ask(url, None, headers, pair) == 403


def test_provider_mode_unsigned_without_a_secret(
    pair: dict[str, Guest],
    cloud: Cloud,
    metadata_server: MetadataServer,
) -> None:
    headers = [("X-Metadata-Provider", cloud.network_id), ("X-Forwarded-For", "{D}, {A}")]
    with metadata_server(("neutron", {"service_metadata_proxy": True})) as url:
        assert ask(url, None, headers, pair) == "A"


# -- session tokens ---------------------------------------------------------------------------


def token_for(url: str, guest: Guest, ttl: str = "60") -> str:
    with guest.client(url) as md:
        r = md.put("/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": ttl})
        assert r.status_code == 200
        return r.text


def expiry_of(token: str) -> int:
    """When a session token runs out, as POSIX time (tokens are ``v1.<expires>.<mac>``)."""
    return int(token.split(".")[1])


def with_token(url: str, guest: Guest, token: str) -> int:
    with guest.client(url) as md:
        return md.get(META, headers={"X-aws-ec2-metadata-token": token}).status_code


def test_token_own(pair: dict[str, Guest], ip_mode: Any) -> None:
    with ip_mode() as url:
        assert with_token(url, pair["A"], token_for(url, pair["A"])) == 200


def test_token_another_instances(pair: dict[str, Guest], ip_mode: Any) -> None:
    with ip_mode() as url:
        assert with_token(url, pair["A"], token_for(url, pair["D"])) == 401


def test_token_expired(pair: dict[str, Guest], ip_mode: Any) -> None:
    with ip_mode() as url:
        token = token_for(url, pair["A"], ttl="1")
        wait_until(lambda: time.time() > expiry_of(token), what="the token's expiry passed")
        assert with_token(url, pair["A"], token) == 401


REWRITES = {
    "leading-zero": lambda v, e, m: f"{v}.0{e}.{m}",
    "plus-sign": lambda v, e, m: f"{v}.+{e}.{m}",
    "underscore": lambda v, e, m: f"{v}.{e[:3]}_{e[3:]}.{m}",
    "spaces": lambda v, e, m: f"{v}. {e} .{m}",
    "upper-case-mac": lambda v, e, m: f"{v}.{e}.{m.upper()}",
    "version": lambda v, e, m: f"v2.{e}.{m}",
    "later-expiry": lambda v, e, m: f"{v}.{int(e) + 1000}.{m}",
    "extra-field": lambda v, e, m: f"{v}.{e}.{m}.x",
}


@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_token_rewritten(rewrite: str, pair: dict[str, Guest], ip_mode: Any) -> None:
    with ip_mode() as url:
        version, expires, mac = token_for(url, pair["A"]).split(".")
        assert with_token(url, pair["A"], REWRITES[rewrite](version, expires, mac)) == 401


def test_token_replayed_after_delete_and_address_reuse(
    api: httpx.Client,
    cloud: Cloud,
    ip_mode: Any,
) -> None:
    old = boot(api, cloud)
    with ip_mode() as url:
        token = token_for(url, old)
        assert api.delete(f"/v2.1/servers/{old.id}").status_code == 204
        assert with_token(url, old, token) == 404  # nobody has the address
        new = boot(api, cloud, networks=[{"uuid": cloud.network_id, "fixed_ip": old.address}])
        assert new.address == old.address
        assert with_token(url, new, token) == 401  # bound to the deleted instance


TOKEN_VIA_PROXY: list[Cell] = [
    ("proxy-appended-only", [("X-Forwarded-For", "{A}")], 200),
    ("guest-relay-hop", [("X-Forwarded-For", "{D}, {A}")], 403),
    ("guest-forwarded-alongside", [("X-Forwarded-For", "{A}"), ("Forwarded", "for={D}")], 403),
    ("guest-x-forwarded-for-line", [("X-Forwarded-For", "{D}"), ("X-Forwarded-For", "{A}")], 403),
]


@pytest.mark.parametrize(
    ("name", "headers", "expected"), TOKEN_VIA_PROXY, ids=[c[0] for c in TOKEN_VIA_PROXY]
)
def test_token_through_the_trusted_proxy(
    name: str, headers: list[tuple[str, str]], expected: int, pair: dict[str, Guest], ip_mode: Any
) -> None:
    with ip_mode() as url, PROXY.client(url) as md:
        r = md.put("/latest/api/token", headers=[*TTL.items(), *fill(headers, pair)])
        assert r.status_code == expected, r.text


# -- deleted instances and address reuse ------------------------------------------------------


def test_deleted_instance_is_gone_when_delete_answers(
    api: httpx.Client,
    cloud: Cloud,
    ip_mode: Any,
) -> None:
    # A poll interval far longer than the test: only the in-process announcement can drop it.
    gone = boot(api, cloud, user_data=b64("old secret"))
    with ip_mode(change_poll_interval_ms=60000) as url, gone.client(url) as md:
        assert md.get("/openstack/latest/user_data").text == "old secret"  # cached now
        assert api.delete(f"/v2.1/servers/{gone.id}").status_code == 204
        assert md.get("/openstack/latest/user_data").status_code == 404
        assert md.get(META).status_code == 404


def test_address_reuse_serves_the_new_instance(
    api: httpx.Client,
    cloud: Cloud,
    ip_mode: Any,
) -> None:
    old = boot(api, cloud, user_data=b64("old secret"))
    with ip_mode(change_poll_interval_ms=60000) as url:
        with old.client(url) as md:
            assert md.get("/openstack/latest/user_data").text == "old secret"
        assert api.delete(f"/v2.1/servers/{old.id}").status_code == 204
        new = boot(api, cloud, networks=[{"uuid": cloud.network_id, "fixed_ip": old.address}])
        assert new.address == old.address
        with new.client(url) as md:
            assert md.get(META).json()["uuid"] == new.id
            assert md.get("/openstack/latest/user_data").status_code == 404
