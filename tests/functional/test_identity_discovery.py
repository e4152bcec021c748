"""The OpenID discovery document's URLs come from configuration, not from the request's
``Host`` header (issue 30, defect 5): a relying party (or a cache in front of the API) must
never be told to fetch the keys it trusts from a host the client named."""

from __future__ import annotations

from typing import Any

import httpx

from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support.identity import ISSUER, Identity, identity_settings
from tests.support.server import running_api, with_options

DISCOVERY = "/.well-known/openid-configuration"
JWKS = "/v2.1/instance-identity/jwks"
EVIL = {"Host": "evil.example"}


def without_issuer(settings: Settings) -> Settings:
    return with_options(identity_settings(settings), "identity", issuer="")


def documents(api: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The document as asked for plainly, and with a spoofed ``Host``."""
    with httpx.Client(base_url=api, timeout=30) as anonymous:
        plain, spoofed = anonymous.get(DISCOVERY), anonymous.get(DISCOVERY, headers=EVIL)
    assert (plain.status_code, spoofed.status_code) == (200, 200), spoofed.text
    return plain.json(), spoofed.json()


def test_a_spoofed_host_changes_nothing_when_the_issuer_is_set(servers: Identity) -> None:
    plain, spoofed = documents(servers.api)
    assert spoofed == plain
    assert (plain["issuer"], plain["jwks_uri"]) == (ISSUER, f"{ISSUER}{JWKS}")


def test_the_link_prefix_stands_in_for_an_unset_issuer(
    migrated_settings: Settings, clean_api_db: Database
) -> None:
    prefix = "https://api.example.test:8774"
    settings = with_options(without_issuer(migrated_settings), "api", compute_link_prefix=prefix)
    with running_api(settings, api_db=clean_api_db, compute=False) as api:
        plain, spoofed = documents(api)
    assert spoofed == plain
    assert (plain["issuer"], plain["jwks_uri"]) == (prefix, f"{prefix}{JWKS}")


def test_with_neither_set_the_request_names_the_jwks(
    migrated_settings: Settings, clean_api_db: Database
) -> None:
    """Today's behaviour, kept for a bare installation (docs/identity.md says the risk and to
    set the issuer): the JWKS is where the request reached the API."""
    settings = without_issuer(migrated_settings)
    with running_api(settings, api_db=clean_api_db, compute=False) as api:
        plain, spoofed = documents(api)
    assert plain["jwks_uri"] == f"{api}{JWKS}"
    assert spoofed["jwks_uri"] == f"http://evil.example{JWKS}"
    assert spoofed["issuer"] == plain["issuer"] != "http://evil.example"
