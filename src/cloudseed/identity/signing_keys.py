"""The cryptography of signed identity, on the ``cryptography`` library and PyJWT. IO-free.

A signing key is RSA-2048 with a self-signed X.509 certificate (what openssl and EC2-style
verifiers take), a JWK (what OIDC libraries take) and a ``kid``: the key's RFC 7638 JWK
thumbprint, so anyone can recompute it from the published key.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import NameOID
from jwt.algorithms import RSAAlgorithm

ALGORITHM = "RS256"
KEY_SIZE = 2048
# Longer than any sensible rotation period: verifiers that check the validity period (openssl
# with -CAfile) must not start failing while the key still signs.
CERTIFICATE_LIFETIME = dt.timedelta(days=20 * 365)
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class NewKey:
    kid: str
    private_pem: str
    certificate_pem: str


def generate(now: dt.datetime, *, secret: str = "") -> NewKey:
    """A new key and its certificate, the private half encrypted with ``secret`` if given."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_SIZE)
    kid = kid_of(key.public_key())
    name = x509.Name(
        [
            # A common name is at most 64 characters: the kid (43) fits, a sentence does not.
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cloudseed instance identity"),
            x509.NameAttribute(NameOID.COMMON_NAME, kid),
        ]
    )
    start = now.replace(tzinfo=dt.UTC) - CLOCK_SKEW
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + CERTIFICATE_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(secret.encode())
        if secret
        else serialization.NoEncryption()
    )
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    return NewKey(
        kid=kid,
        private_pem=private_pem.decode(),
        certificate_pem=certificate.public_bytes(serialization.Encoding.PEM).decode(),
    )


def is_encrypted(private_pem: str) -> bool:
    return private_pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")


def load_private(private_pem: str, *, secret: str = "") -> rsa.RSAPrivateKey:
    """The private key; ValueError when it is encrypted and ``secret`` does not open it."""
    if is_encrypted(private_pem):
        if not secret:
            raise ValueError("the key is encrypted and no secret was given")
        password: bytes | None = secret.encode()
    else:
        password = None  # a plain key stays readable after a secret is configured
    key = serialization.load_pem_private_key(private_pem.encode(), password=password)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("not an RSA key")
    return key


def load_certificate(certificate_pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(certificate_pem.encode())


def public_jwk(public_key: rsa.RSAPublicKey) -> dict[str, Any]:
    """``kty``, ``n`` and ``e`` of the key, as PyJWT writes them."""
    jwk: dict[str, Any] = RSAAlgorithm.to_jwk(public_key, as_dict=True)
    return {name: jwk[name] for name in ("kty", "n", "e")}


def kid_of(public_key: rsa.RSAPublicKey) -> str:
    """RFC 7638: base64url SHA-256 of the required members, sorted, without whitespace."""
    canonical = json.dumps(public_jwk(public_key), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def jwk_entry(public_key: rsa.RSAPublicKey, kid: str) -> dict[str, Any]:
    """One key of the JWKS."""
    return {**public_jwk(public_key), "kid": kid, "alg": ALGORITHM, "use": "sig"}


def sign(private_key: rsa.RSAPrivateKey, data: bytes) -> bytes:
    """RSA PKCS#1 v1.5 with SHA-256 (EC2's ``signature``: ``openssl dgst -sha256 -verify``)."""
    return private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def pkcs7_body(private_key: rsa.RSAPrivateKey, certificate: x509.Certificate, data: bytes) -> str:
    """PKCS#7 signed data with ``data`` attached, as EC2 serves it: the base64 lines of the PEM
    without the BEGIN/END lines. No certificate inside (the verifier brings the published
    one, ``-certfile``), and binary mode, so the signed bytes are exactly ``data`` (not with
    CRLF line ends, S/MIME's text canonical form)."""
    pem = (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(data)
        .add_signer(certificate, private_key, hashes.SHA256())
        .sign(
            serialization.Encoding.PEM,
            [pkcs7.PKCS7Options.Binary, pkcs7.PKCS7Options.NoCerts],
        )
    )
    lines = pem.decode().strip().splitlines()
    return "\n".join(lines[1:-1])


def encode_jwt(claims: dict[str, Any], private_key: rsa.RSAPrivateKey, kid: str) -> str:
    return jwt.encode(claims, private_key, algorithm=ALGORITHM, headers={"kid": kid})
