"""Signed instance identity over real HTTP (docs/identity.md): a guest fetches its EC2 identity
document and its signatures, and identity tokens, from a metadata service; a relying party
verifies them knowing only what a compute API on another loopback port publishes without
credentials (PyJWT's JWKS client, the openssl command, cryptography). Rotation moves time by
writing the rows' times, never by sleeping."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from sqlalchemy import update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.identity import service
from cloudseed.identity.models import IdentityKey
from cloudseed.settings import Settings
from tests.support.cloud import Cloud
from tests.support.guests import boot
from tests.support.identity import (
    ISSUER,
    TOKEN_PATH,
    Identity,
    identity_settings,
    identity_token,
    session_token,
    verify,
)
from tests.support.openssl import openssl, pkcs7_verified
from tests.support.server import running_api, with_options

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

GRACE = dt.timedelta(seconds=86400)
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")


# -- what relying parties read ----------------------------------------------------------------


def test_keys_are_published_without_credentials(servers: Identity) -> None:
    with httpx.Client(base_url=servers.api, timeout=30) as anonymous:
        discovery = anonymous.get("/.well-known/openid-configuration")
        assert discovery.status_code == 200
        assert discovery.json() == {
            "issuer": ISSUER,
            "jwks_uri": f"{ISSUER}/v2.1/instance-identity/jwks",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "claims_supported": [
                *("iss", "sub", "aud", "iat", "nbf", "exp", "jti", "project_id", "image_id"),
                *("flavor", "availability_zone", "host_keys"),
            ],
        }
        (key,) = anonymous.get("/v2.1/instance-identity/jwks").json()["keys"]
        assert sorted(key) == ["alg", "e", "kid", "kty", "n", "use"]
        assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")
        (cert,) = anonymous.get("/v2.1/instance-identity/certificates").json()["certificates"]
        assert cert["kid"] == key["kid"] and cert["signing"] is True
        assert cert["retired_at"] is None and cert["published_until"] is None
        parsed = x509.load_pem_x509_certificate(cert["certificate"].encode())
        public = parsed.public_key()
        assert isinstance(public, rsa.RSAPublicKey) and public.key_size == 2048
        pem = anonymous.get(
            "/v2.1/instance-identity/certificates", headers={"Accept": "application/x-pem-file"}
        )
        assert pem.headers["content-type"].startswith("application/x-pem-file")
        assert pem.text == cert["certificate"]
        # Still an API that needs credentials everywhere else, and these are read-only.
        assert anonymous.get("/v2.1/servers").status_code == 401
        assert anonymous.post("/v2.1/instance-identity/jwks").status_code == 405
        # At every microversion: an extension, like bootstrap-history.
        for version in ("2.1", "2.104", "2.105"):
            r = anonymous.get(
                "/v2.1/instance-identity/jwks",
                headers={"OpenStack-API-Version": f"compute {version}"},
            )
            assert r.status_code == 200 and r.json()["keys"] == [key]


# keystonemiddleware (through webob) imports the cgi module, deprecated since Python 3.11.
@pytest.mark.filterwarnings("ignore:'cgi' is deprecated:DeprecationWarning")
def test_keys_are_public_under_keystone_too(
    migrated_settings: Settings, clean_api_db: Database
) -> None:
    settings = identity_settings(migrated_settings)
    settings = dataclasses.replace(
        with_options(settings, "api", auth_strategy="keystone"),
        passthrough={
            "keystone_authtoken": {
                "auth_url": "http://127.0.0.1:9/identity",
                "www_authenticate_uri": "http://127.0.0.1:9/identity",
                "auth_type": "password",
                "username": "nova",
                "password": "unused",
            }
        },
    )
    with (
        running_api(settings, api_db=clean_api_db, compute=False) as api,
        httpx.Client(base_url=api) as anonymous,
    ):
        for path in (
            "/.well-known/openid-configuration",
            "/v2.1/instance-identity/jwks",
            "/v2.1/instance-identity/certificates",
        ):
            assert anonymous.get(path).status_code == 200, path
        assert anonymous.get("/v2.1/servers").status_code == 401


# -- the identity token -----------------------------------------------------------------------


def test_identity_token_verifies_from_the_published_keys_alone(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
) -> None:
    guest = boot(api, cloud, availability_zone="nova")
    with guest.client(servers.metadata) as md:
        token = identity_token(md, "https://vault.example:8200")
        again = identity_token(md, "https://vault.example:8200")
    claims = verify(servers.api, token, "https://vault.example:8200")
    assert claims["iss"] == ISSUER and claims["sub"] == guest.id
    assert claims["project_id"] == "proj"
    assert claims["image_id"] == cloud.image_id
    assert claims["flavor"] == "m1.tiny"
    assert claims["availability_zone"] == "nova"
    assert claims["host_keys"] == []  # none reported yet (tests/functional/test_host_keys.py)
    assert claims["exp"] - claims["iat"] == 600 and claims["nbf"] == claims["iat"]
    assert verify(servers.api, again, "https://vault.example:8200")["jti"] != claims["jti"]
    # Another audience's token is refused by this one.
    with pytest.raises(jwt.InvalidAudienceError):
        verify(servers.api, token, "someone-else")


def test_identity_token_needs_a_session_token_even_when_metadata_does_not(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
) -> None:
    guest = boot(api, cloud)
    with guest.client(servers.metadata) as md:
        assert md.get("/openstack/latest/meta_data.json").status_code == 200  # no token needed
        r = md.get(TOKEN_PATH, params={"audience": "vault"})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Token"
        bad = {
            "X-aws-ec2-metadata-token": "v1.99999999999.0000000000000000000000000000000000000000"
        }
        assert md.get(TOKEN_PATH, params={"audience": "vault"}, headers=bad).status_code == 401
        for method in ("POST", "PUT", "DELETE"):
            assert md.request(method, TOKEN_PATH).status_code == 405, method
        # Only under latest: a dated version's contents never change.
        token = session_token(md)
        assert md.get("/openstack/2025-04-04/identity_token", headers=token).status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?audience",
        "?audience=",
        "?audience=" + "a" * 256,
        "?audience=%ED%A0%80",  # a lone surrogate
        "?audience=a%ED%A0%80b",
        "?audience=%FF%FE",
        "?audience=a%00b",
        "?audience=line%0Abreak",
        "?audience=a&audience=b",
        "?audience=a&extra=1",
        "?" + "&".join(["audience=a"] * 50),
    ],
)
def test_bad_audiences_are_400(
    query: str,
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
) -> None:
    guest = boot(api, cloud)
    with guest.client(servers.metadata) as md:
        r = md.get(TOKEN_PATH + query, headers=session_token(md))
        assert r.status_code == 400, r.text
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.text.startswith("400 Bad Request\n\n")


# -- EC2's identity document ------------------------------------------------------------------


def test_ec2_dynamic_tree(api: httpx.Client, cloud: Cloud, servers: Identity) -> None:
    guest = boot(api, cloud, availability_zone="nova")
    with guest.client(servers.metadata) as md:
        assert md.get("/latest").text.splitlines() == ["dynamic/", "meta-data/"]
        assert md.get("/2008-09-01").text.splitlines() == ["meta-data/"]
        assert md.get("/latest/dynamic").text == "instance-identity/"
        assert md.get("/latest/dynamic/instance-identity/").text.splitlines() == [
            "document",
            "pkcs7",
            "rsa2048",
            "signature",
        ]
        for path in (
            "/2008-09-01/dynamic/instance-identity/document",
            "/latest/dynamic/other",
            "/latest/dynamic/instance-identity/dsa2048",
            "/latest/dynamic/instance-identity/document/x",
        ):
            assert md.get(path).status_code == 404, path
        r = md.get("/latest/dynamic/instance-identity/document")
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        document = r.json()
        assert document["instanceId"] == md.get("/latest/meta-data/instance-id").text
        assert document["imageId"] == md.get("/latest/meta-data/ami-id").text
        assert document["privateIp"] == md.get("/latest/meta-data/local-ipv4").text
        assert document["privateIp"] == guest.address
        assert document["accountId"] == "proj"
        assert document["instanceType"] == "m1.tiny"
        assert document["availabilityZone"] == document["region"] == "nova"
        assert document["architecture"] == "x86_64" and document["version"] == "2017-09-30"
        pending = dt.datetime.strptime(document["pendingTime"], "%Y-%m-%dT%H:%M:%SZ")
        assert abs(pending - utcnow()) < dt.timedelta(minutes=5)
        assert md.get("/2009-04-04/dynamic/instance-identity/document").content == r.content
        assert md.get("/ec2/latest/dynamic/instance-identity/document").content == r.content


@needs_openssl
def test_ec2_signatures_verify_with_openssl_and_cryptography(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud)
    with guest.client(servers.metadata) as md:
        base = "/latest/dynamic/instance-identity/"
        document = md.get(base + "document").content
        forms = {name: md.get(base + name).text for name in ("signature", "pkcs7", "rsa2048")}
        assert md.get("/2009-04-04/dynamic/instance-identity/rsa2048").text == forms["rsa2048"]
    bundle = httpx.get(
        f"{servers.api}/v2.1/instance-identity/certificates",
        headers={"Accept": "application/x-pem-file"},
    ).text
    (tmp_path / "certificates.pem").write_text(bundle)
    (tmp_path / "document").write_bytes(document)
    for name in ("pkcs7", "rsa2048"):
        body = forms[name]
        assert "BEGIN" not in body
        # docs/identity.md's commands, as a relying party runs them.
        for command in ("smime", "cms"):
            out = pkcs7_verified(tmp_path, name, body, command)
            assert out == document, (name, command)
    # The base64 signature: with openssl dgst, and with cryptography.
    (tmp_path / "signature").write_bytes(base64.b64decode(forms["signature"]))
    (tmp_path / "key.pem").write_bytes(
        openssl(tmp_path, "x509", "-pubkey", "-noout", "-in", "certificates.pem")
    )
    out = openssl(
        tmp_path, "dgst", "-sha256", "-verify", "key.pem", "-signature", "signature", "document"
    )
    assert out.strip() == b"Verified OK"
    certificate = x509.load_pem_x509_certificate(bundle.encode())
    public = certificate.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    public.verify(
        base64.b64decode(forms["signature"]), document, padding.PKCS1v15(), hashes.SHA256()
    )


# -- rotation -----------------------------------------------------------------------------------


def test_rotation_keeps_old_tokens_verifiable_for_the_grace_period_then_drops_them(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
    api_db: Database,
) -> None:
    guest = boot(api, cloud)
    with guest.client(servers.metadata) as md:
        old_token = identity_token(md)
        old_kid = jwt.get_unverified_header(old_token)["kid"]
        # A rotation two minutes short of a day ago: the old key has two minutes of its grace
        # left, and the new one became active long since.
        rotated_at = utcnow() - GRACE + dt.timedelta(minutes=2)
        api_db.run(lambda session: service.rotate(session, now=rotated_at, grace=GRACE), write=True)
        new_token = identity_token(md)
    new_kid = jwt.get_unverified_header(new_token)["kid"]
    assert new_kid != old_kid
    published = httpx.get(f"{servers.api}/v2.1/instance-identity/certificates").json()
    assert [(c["kid"], c["signing"]) for c in published["certificates"]] == [
        (new_kid, True),
        (old_kid, False),
    ]
    assert verify(servers.api, old_token)["sub"] == guest.id
    assert verify(servers.api, new_token)["sub"] == guest.id

    # Three minutes later (the rows' time moved back instead): the old key's grace is over.
    def work(session: Session) -> None:
        session.execute(
            update(IdentityKey)
            .where(IdentityKey.kid == old_kid)
            .values(retired_at=rotated_at - dt.timedelta(minutes=3))
        )

    api_db.run(work, write=True)
    jwks = httpx.get(f"{servers.api}/v2.1/instance-identity/jwks").json()
    assert [k["kid"] for k in jwks["keys"]] == [new_kid]
    with pytest.raises(jwt.PyJWKClientError):
        verify(servers.api, old_token)
    assert verify(servers.api, new_token)["sub"] == guest.id


def test_signed_forms_follow_the_signing_key(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
    api_db: Database,
) -> None:
    guest = boot(api, cloud)
    with guest.client(servers.metadata) as md:
        before = md.get("/latest/dynamic/instance-identity/signature").text
        assert md.get("/latest/dynamic/instance-identity/signature").text == before
        api_db.run(
            lambda session: service.rotate(
                session, now=utcnow() - dt.timedelta(hours=1), grace=GRACE
            ),
            write=True,
        )
        after = md.get("/latest/dynamic/instance-identity/signature").text
    assert after != before
    document = json.loads(httpx.get(f"{servers.api}/v2.1/instance-identity/certificates").text)[
        "certificates"
    ]
    signing = next(c for c in document if c["signing"])
    public = x509.load_pem_x509_certificate(signing["certificate"].encode()).public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    with guest.client(servers.metadata) as md:
        signed = md.get("/latest/dynamic/instance-identity/document").content
    public.verify(base64.b64decode(after), signed, padding.PKCS1v15(), hashes.SHA256())


def test_guest_cannot_see_other_guests_identity(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
) -> None:
    a, d = boot(api, cloud), boot(api, cloud)
    with a.client(servers.metadata) as md:
        document = md.get("/latest/dynamic/instance-identity/document").json()
        assert document["privateIp"] == a.address
        assert document["instanceId"] == md.get("/latest/meta-data/instance-id").text
    with d.client(servers.metadata) as md:
        assert md.get("/latest/dynamic/instance-identity/document").json() != document
