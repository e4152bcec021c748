"""Signed identity in the Nova drop-in, from a test's side: cloudseed's own database for a
deployment of tests/support/nova_without_nova.py (``[cloudseed_metadata] connection`` on a
scratch database of the same backend), the drop-in's sub-commands run as real processes, and
what a relying party does with the keys the listener publishes."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support import databases
from tests.support.nova_without_nova import NovaDeployment, command

TTL = {"X-aws-ec2-metadata-token-ttl-seconds": "300"}
TOKEN_PATH = "/openstack/latest/identity_token"
DOCUMENT = "/latest/dynamic/instance-identity/document"


@contextmanager
def signing_conf(nova: NovaDeployment, backend: str, **options: Any) -> Iterator[tuple[Path, str]]:
    """nova.conf with ``[cloudseed_metadata] connection`` on a new scratch database of
    ``backend`` (synced: ``db sync`` run), and ``options`` in that section; and the URL."""
    with databases.scratch_database(backend, str(nova.directory)) as url:
        conf = nova.conf(cloudseed_metadata={"connection": url, **options})
        out = run(conf, "db", "sync")
        assert out.returncode == 0, out.stderr
        yield conf, url


def run(conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cloudseed nova-metadata --config-file conf ARGS`` to its end."""
    return subprocess.run(
        command("--config-file", str(conf), *args),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def session_token(base: str, headers: dict[str, str]) -> dict[str, str]:
    answer = httpx.put(base + "/latest/api/token", headers={**headers, **TTL}, timeout=30)
    assert answer.status_code == 200, answer.text
    return {"X-aws-ec2-metadata-token": answer.text}


def verify_token(base: str, token: str, audience: str) -> dict[str, Any]:
    """What a relying party does: discovery on the listener, the JWKS it names, PyJWT."""
    discovery = httpx.get(base + "/.well-known/openid-configuration", timeout=30).json()
    assert discovery["jwks_uri"] == discovery["issuer"] + "/v2.1/instance-identity/jwks"
    client = jwt.PyJWKClient(discovery["jwks_uri"], cache_keys=False, cache_jwk_set=False)
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


def verify_signature(certificates_pem: str, document: bytes, signature: str) -> str:
    """The kid (certificate CN) of the published certificate whose key made ``signature``
    over ``document``; AssertionError when none did."""
    for block in certificates_pem.split("-----END CERTIFICATE-----")[:-1]:
        certificate = x509.load_pem_x509_certificate(
            (block + "-----END CERTIFICATE-----\n").encode()
        )
        public = certificate.public_key()
        assert isinstance(public, rsa.RSAPublicKey)
        try:
            public.verify(
                base64.b64decode(signature), document, padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:  # another key's certificate: try the next
            continue
        common_name = certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
        return str(common_name[0].value)
    raise AssertionError("no published certificate verifies the signature")
