"""Response bodies for os-keypairs, per microversion (Nova's view builder, field for field).

Below 2.105 the bodies are exactly Nova's, because strict clients (tempest) reject extra fields.
From 2.105, cloudseed adds ``fingerprint_sha256`` (OpenSSH's ``SHA256:...`` form).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cloudseed.keypairs.models import KeyPair
from cloudseed.keypairs.service import ListedRow
from cloudseed.web.microversions import APIVersion

V2_2 = APIVersion(2, 2)
SHA256_FIELD_SINCE = APIVersion(2, 105)


def _common(keypair: KeyPair, version: APIVersion) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": keypair.name,
        "public_key": keypair.public_key,
        "fingerprint": keypair.fingerprint,
    }
    if version >= V2_2:
        body["type"] = keypair.type
    if version >= SHA256_FIELD_SINCE:
        body["fingerprint_sha256"] = keypair.fingerprint_sha256
    return body


def index(rows: Sequence[ListedRow], version: APIVersion) -> list[dict[str, Any]]:
    """The ``keypairs`` list: ``_common``'s fields for each row, built straight from the
    tuples (per-row attribute lookups and version checks were most of a list's cost)."""
    if version >= SHA256_FIELD_SINCE:
        return [
            {
                "keypair": {
                    "name": name,
                    "public_key": public_key,
                    "fingerprint": fingerprint,
                    "type": key_type,
                    "fingerprint_sha256": sha256,
                }
            }
            for name, public_key, fingerprint, key_type, sha256 in rows
        ]
    if version >= V2_2:
        return [
            {
                "keypair": {
                    "name": name,
                    "public_key": public_key,
                    "fingerprint": fingerprint,
                    "type": key_type,
                }
            }
            for name, public_key, fingerprint, key_type, _ in rows
        ]
    return [
        {"keypair": {"name": name, "public_key": public_key, "fingerprint": fingerprint}}
        for name, public_key, fingerprint, _, _ in rows
    ]


def created(keypair: KeyPair, version: APIVersion, private_key: str | None) -> dict[str, Any]:
    body = _common(keypair, version)
    body["user_id"] = keypair.user_id
    if private_key is not None:
        body["private_key"] = private_key
    return {"keypair": body}


def shown(keypair: KeyPair, version: APIVersion) -> dict[str, Any]:
    body = _common(keypair, version)
    body.update(
        {
            "user_id": keypair.user_id,
            # Key pairs are deleted for real; Nova still reports these fixed values.
            "deleted": False,
            "deleted_at": None,
            "created_at": keypair.created_at.isoformat(),
            "updated_at": keypair.updated_at.isoformat() if keypair.updated_at else None,
            "id": keypair.id,
        }
    )
    return {"keypair": body}
