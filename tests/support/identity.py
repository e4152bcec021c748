"""Signed instance identity from a guest's side and a relying party's (docs/identity.md):
settings that turn it on, session and identity tokens, and the verification PyJWT does."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import jwt

from cloudseed.settings import Settings
from tests.support.server import with_options

ISSUER = "https://cloud.example.test"


TTL = {"X-aws-ec2-metadata-token-ttl-seconds": "300"}


TOKEN_PATH = "/openstack/latest/identity_token"


@dataclasses.dataclass
class Identity:
    api: str  # a compute API with no compute agent, for the relying party
    metadata: str


def identity_settings(settings: Settings, **more: Any) -> Settings:
    # key_cache_seconds = 0: each server reads the keys every time, so what a test writes is
    # seen at once (the tests empty the tables between tests, too).
    settings = with_options(settings, "identity", issuer=ISSUER, key_cache_seconds=0, **more)
    return with_options(settings, "metadata", trusted_proxies="127.0.0.250")


def session_token(md: httpx.Client, **headers: str) -> dict[str, str]:
    r = md.put("/latest/api/token", headers={**TTL, **headers})
    assert r.status_code == 200, r.text
    return {"X-aws-ec2-metadata-token": r.text}


def identity_token(md: httpx.Client, audience: str = "vault") -> str:
    r = md.get(TOKEN_PATH, params={"audience": audience}, headers=session_token(md))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/jwt"
    assert r.headers["cache-control"] == "no-store"
    return r.text


def verify(api: str, token: str, audience: str = "vault") -> dict[str, Any]:
    """What a relying party does: discovery, then the JWKS it names, then PyJWT."""
    discovery = httpx.get(f"{api}/.well-known/openid-configuration").json()
    # The JWKS is named under the issuer, the API's public URL; this relying party reaches
    # that URL at ``api`` (as through the proxy the public name would point at).
    jwks_uri = discovery["jwks_uri"]
    if discovery["issuer"] == ISSUER:
        assert jwks_uri.startswith(f"{ISSUER}/"), jwks_uri
        jwks_uri = api + jwks_uri.removeprefix(ISSUER)
    client = jwt.PyJWKClient(jwks_uri, cache_keys=False, cache_jwk_set=False)
    key = client.get_signing_key_from_jwt(token)
    claims: dict[str, Any] = jwt.decode(
        token,
        key.key,
        algorithms=discovery["id_token_signing_alg_values_supported"],
        audience=audience,
        issuer=discovery["issuer"],
        options={"require": ["exp", "iat", "nbf", "iss", "sub", "aud", "jti"]},
    )
    return claims
