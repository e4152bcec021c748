"""Real key material for tests, made with cryptography (no fixtures copied from elsewhere)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID


def ed25519_public(comment: str = "test@cloudseed") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    return f"{line} {comment}"


def ecdsa_public() -> str:
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    return key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()


def rsa_public(bits: int = 2048) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits).public_key()
    return key.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()


def md5_fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, 32, 2))


def self_signed_pem(common_name: str = "alice") -> tuple[str, str]:
    """A PEM certificate and its SHA-1 fingerprint in Nova's colon-hex form."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    digest = hashlib.sha1(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    fingerprint = ":".join(digest[i : i + 2] for i in range(0, 40, 2))
    return cert.public_bytes(serialization.Encoding.PEM).decode(), fingerprint
