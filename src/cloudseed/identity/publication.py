"""What relying parties are handed to verify signed identities with: the published keys as
X.509 certificates (JSON, or the PEM bundle ``openssl -certfile`` takes), as a JWK Set, and
the OpenID discovery document naming them. IO-free: the keys come in as ``PublishedKey``s,
the issuer and the JWKS's URL as strings.

Served without authentication by the compute API (``api.py``) and by the Nova drop-in's
metadata listener (``nova_metadata/identity.py``), and printed by the drop-in's
``identity jwks`` and ``identity certificates`` commands: one shape everywhere.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from cloudseed.identity import signing_keys as keys
from cloudseed.identity.claims import CLAIMS
from cloudseed.identity.keyring import PublishedKey

CERTIFICATES = "/v2.1/instance-identity/certificates"
JWKS = "/v2.1/instance-identity/jwks"
DISCOVERY = "/.well-known/openid-configuration"
PEM = "application/x-pem-file"


def _time(value: dt.datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def certificates(published: list[PublishedKey], signing: str) -> dict[str, Any]:
    """``{"certificates": [...]}``; ``signing``: the kid of the key that signs now."""
    return {
        "certificates": [
            {
                "kid": k.kid,
                "certificate": k.certificate_pem,
                "signing": k.kid == signing,
                "created_at": _time(k.created_at),
                "retired_at": _time(k.retired_at),
                "published_until": _time(k.published_until),
            }
            for k in published
        ]
    }


def certificates_pem(published: list[PublishedKey]) -> str:
    """The certificates one after the other, newest first."""
    return "".join(k.certificate_pem for k in published)


def jwks(published: list[PublishedKey]) -> dict[str, Any]:
    return {"keys": [keys.jwk_entry(k.public_key, k.kid) for k in published]}


def discovery(issuer: str, jwks_uri: str) -> dict[str, Any]:
    """OpenID discovery: what Kubernetes' service account issuer discovery serves for the same
    use, plus the claims."""
    return {
        "issuer": issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": [keys.ALGORITHM],
        "claims_supported": list(CLAIMS),
    }


def cache_control(seconds: int) -> str:
    """How long an answer may be kept: ``key_cache_seconds``, since a rotated key signs only
    after twice that (a relying party that honours it has fetched the key by then)."""
    return f"public, max-age={seconds}" if seconds else "no-cache"
