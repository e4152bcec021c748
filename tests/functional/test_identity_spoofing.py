"""An identity token is never served to another instance: the same identification as every
other document (tests/functional/test_metadata_spoofing.py), plus the session token, which is
bound to the instance it was issued to. Guest A is the attacker, D the victim."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import jwt
import pytest

from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from cloudseed.signing import sign
from tests.support.cloud import Cloud
from tests.support.guests import SECRET, Guest, boot
from tests.support.identity import TOKEN_PATH, TTL, identity_settings, session_token
from tests.support.server import running_metadata, with_options

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

AUDIENCE = {"audience": "vault"}


@pytest.fixture()
def pair(api: httpx.Client, cloud: Cloud) -> dict[str, Guest]:
    return {"A": boot(api, cloud), "D": boot(api, cloud)}


@pytest.fixture()
def ip_mode(migrated_settings: Settings, clean_api_db: Database) -> Iterator[str]:
    with running_metadata(identity_settings(migrated_settings), api_db=clean_api_db) as url:
        yield url


@pytest.fixture()
def proxy_mode(migrated_settings: Settings, clean_api_db: Database) -> Iterator[str]:
    settings = with_options(
        identity_settings(migrated_settings),
        "neutron",
        service_metadata_proxy=True,
        metadata_proxy_shared_secret=SECRET,
    )
    with running_metadata(settings, api_db=clean_api_db) as url:
        yield url


def subject(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(jwt.decode(response.text, options={"verify_signature": False})["sub"])


def signed_as(guest: Guest, signature: str | None = None) -> dict[str, str]:
    """What a metadata proxy sends for ``guest`` (with a forged signature, if given)."""
    return {
        "X-Instance-ID": guest.id,
        "X-Tenant-ID": guest.project_id,
        "X-Instance-ID-Signature": signature if signature is not None else sign(SECRET, guest.id),
    }


# -- by source address: headers name nobody ---------------------------------------------------


def test_forged_instance_headers_still_get_the_callers_own_token(
    pair: dict[str, Guest], ip_mode: str
) -> None:
    a, d = pair["A"], pair["D"]
    with a.client(ip_mode) as md:
        token = session_token(md)
        for forged in (signed_as(d, "0" * 64), signed_as(d)):
            r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, **forged})
            assert subject(r) == a.id


def test_another_instances_session_token_is_refused(pair: dict[str, Guest], ip_mode: str) -> None:
    a, d = pair["A"], pair["D"]
    with d.client(ip_mode) as md:
        victims = session_token(md)
        assert subject(md.get(TOKEN_PATH, params=AUDIENCE, headers=victims)) == d.id
    with a.client(ip_mode) as md:
        r = md.get(TOKEN_PATH, params=AUDIENCE, headers=victims)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Token"


def test_not_through_a_forwarder_in_a_guest(pair: dict[str, Guest], ip_mode: str) -> None:
    a, d = pair["A"], pair["D"]
    with a.client(ip_mode) as md:
        token = session_token(md)
        for header in ("X-Forwarded-For", "Forwarded"):
            value = d.address if header == "X-Forwarded-For" else f"for={d.address}"
            r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, header: value})
            assert r.status_code == 403, header


def test_a_trusted_proxy_relays_for_the_guest_it_names(
    pair: dict[str, Guest], ip_mode: str
) -> None:
    a = pair["A"]
    proxy = Guest("proxy", "127.0.0.250", "")  # in trusted_proxies
    with proxy.client(ip_mode) as md:
        token = session_token(md, **{"X-Forwarded-For": a.address})
        r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, "X-Forwarded-For": a.address})
        assert subject(r) == a.id
        relayed = {**token, "X-Forwarded-For": f"127.0.0.77, {a.address}"}
        assert md.get(TOKEN_PATH, params=AUDIENCE, headers=relayed).status_code == 403


# -- behind a metadata proxy: only its signature names an instance ---------------------------


def test_proxy_mode_unsigned_or_forged_instance_ids_are_refused(
    pair: dict[str, Guest], proxy_mode: str
) -> None:
    a, d = pair["A"], pair["D"]
    with httpx.Client(base_url=proxy_mode, timeout=10) as md:
        token = session_token(md, **signed_as(a))
        assert subject(md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, **signed_as(a)})) == (
            a.id
        )
        forged = signed_as(d, sign("not-the-secret", d.id))
        r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, **forged})
        assert r.status_code == 403
        unsigned = {k: v for k, v in signed_as(d).items() if k != "X-Instance-ID-Signature"}
        r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, **unsigned})
        assert r.status_code == 400
        # A's session token presented for D (rightly signed, as D's own proxy would): 401.
        r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, **signed_as(d)})
        assert r.status_code == 401
        # The tenant must own the instance.
        wrong_tenant = {**signed_as(a), "X-Tenant-ID": "other"}
        r = md.get(TOKEN_PATH, params=AUDIENCE, headers={**token, **wrong_tenant})
        assert r.status_code == 404
        # No session token without a signed caller either.
        assert md.put("/latest/api/token", headers={**TTL, **forged}).status_code == 403
