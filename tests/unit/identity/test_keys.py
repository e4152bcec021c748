"""cloudseed.identity.signing_keys: the key, its certificate, its kid and the signed forms, checked
with independent tools: the openssl command (certificate, PKCS#7, the EC2 ``signature``),
cryptography's own verification, PyJWT, and RFC 7638's published example thumbprint."""

from __future__ import annotations

import base64
import datetime as dt
import shutil
import subprocess
from pathlib import Path

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from jwt.algorithms import RSAAlgorithm

from cloudseed.identity import signing_keys as keys

# Yesterday: openssl -CAfile checks the certificate is already valid.
NOW = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=1)
DOCUMENT = b'{\n  "accountId" : "proj",\n  "region" : "nova \xc3\xbc"\n}'
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")


@pytest.fixture(scope="module")
def made() -> keys.NewKey:
    return keys.generate(NOW)


@pytest.fixture(scope="module")
def private(made: keys.NewKey) -> rsa.RSAPrivateKey:
    return keys.load_private(made.private_pem)


def test_the_key_is_rsa_2048_with_a_self_signed_certificate(made: keys.NewKey) -> None:
    key = keys.load_private(made.private_pem)
    cert = keys.load_certificate(made.certificate_pem)
    assert key.key_size == 2048
    assert cert.public_key() == key.public_key()
    assert cert.issuer == cert.subject
    assert cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == made.kid
    assert cert.not_valid_before_utc <= NOW.replace(tzinfo=dt.UTC) < cert.not_valid_after_utc
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature
    assert made.kid == keys.kid_of(key.public_key())


def test_kid_is_the_rfc_7638_thumbprint() -> None:
    # RFC 7638 section 3.1: this key's thumbprint is NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs.
    n = (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJ"
        "ECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW"
        "2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQ"
        "Fh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
    )
    public = RSAAlgorithm.from_jwk({"kty": "RSA", "n": n, "e": "AQAB"})
    assert isinstance(public, rsa.RSAPublicKey)
    assert keys.kid_of(public) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_encrypted_at_rest_only_with_a_secret() -> None:
    plain = keys.generate(NOW)
    sealed = keys.generate(NOW, secret="s3cret")
    assert plain.private_pem.startswith("-----BEGIN PRIVATE KEY-----")
    assert sealed.private_pem.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert keys.load_private(sealed.private_pem, secret="s3cret").key_size == 2048
    # A plain key stays readable once a secret is configured; a sealed one needs the secret.
    assert keys.load_private(plain.private_pem, secret="s3cret").key_size == 2048
    for secret in ("", "wrong"):
        with pytest.raises(ValueError):
            keys.load_private(sealed.private_pem, secret=secret)


def test_jwk_entry_round_trips_through_pyjwt(made: keys.NewKey, private: rsa.RSAPrivateKey) -> None:
    entry = keys.jwk_entry(private.public_key(), made.kid)
    assert set(entry) == {"kty", "n", "e", "kid", "alg", "use"}
    assert (entry["kty"], entry["alg"], entry["use"], entry["e"]) == ("RSA", "RS256", "sig", "AQAB")
    token = keys.encode_jwt({"sub": "x", "aud": "a"}, private, made.kid)
    assert jwt.get_unverified_header(token) == {"alg": "RS256", "kid": made.kid, "typ": "JWT"}
    public = jwt.PyJWK(entry).key
    assert jwt.decode(token, public, algorithms=["RS256"], audience="a")["sub"] == "x"


def test_signature_verifies_with_cryptography(private: rsa.RSAPrivateKey) -> None:
    signature = keys.sign(private, DOCUMENT)
    private.public_key().verify(signature, DOCUMENT, padding.PKCS1v15(), hashes.SHA256())


@needs_openssl
def test_signature_verifies_with_openssl(
    made: keys.NewKey, private: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    (tmp_path / "certificate").write_text(made.certificate_pem)
    (tmp_path / "document").write_bytes(DOCUMENT)
    (tmp_path / "signature").write_bytes(keys.sign(private, DOCUMENT))
    key = _openssl(tmp_path, "x509", "-pubkey", "-noout", "-in", "certificate")
    (tmp_path / "key").write_bytes(key)
    out = _openssl(
        tmp_path, "dgst", "-sha256", "-verify", "key", "-signature", "signature", "document"
    )
    assert out.strip() == b"Verified OK"


@needs_openssl
@pytest.mark.parametrize("command", ["smime", "cms"])
def test_pkcs7_verifies_with_openssl_and_carries_the_document(
    command: str, made: keys.NewKey, private: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    body = keys.pkcs7_body(private, keys.load_certificate(made.certificate_pem), DOCUMENT)
    assert "BEGIN" not in body and base64.b64decode(body)  # EC2's form: no PEM armour
    (tmp_path / "pkcs7").write_text(f"-----BEGIN PKCS7-----\n{body}\n-----END PKCS7-----\n")
    (tmp_path / "certificate").write_text(made.certificate_pem)
    # EC2's documented command (-noverify: the signer certificate is taken as given) ...
    out = _openssl(
        tmp_path,
        command,
        "-verify",
        "-in",
        "pkcs7",
        "-inform",
        "PEM",
        "-certfile",
        "certificate",
        "-noverify",
        "-binary",
    )
    assert out == DOCUMENT
    # ... and the stricter one: the published certificate as the only trust anchor.
    out = _openssl(
        tmp_path,
        command,
        "-verify",
        "-in",
        "pkcs7",
        "-inform",
        "PEM",
        "-certfile",
        "certificate",
        "-CAfile",
        "certificate",
        "-binary",
    )
    assert out == DOCUMENT


@needs_openssl
def test_pkcs7_of_another_key_does_not_verify(made: keys.NewKey, tmp_path: Path) -> None:
    other = keys.generate(NOW)
    body = keys.pkcs7_body(
        keys.load_private(other.private_pem), keys.load_certificate(other.certificate_pem), DOCUMENT
    )
    (tmp_path / "pkcs7").write_text(f"-----BEGIN PKCS7-----\n{body}\n-----END PKCS7-----\n")
    (tmp_path / "certificate").write_text(made.certificate_pem)
    result = subprocess.run(
        [
            "openssl",
            "smime",
            "-verify",
            "-in",
            "pkcs7",
            "-inform",
            "PEM",
            "-certfile",
            "certificate",
            "-CAfile",
            "certificate",
        ],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert result.returncode != 0


def _openssl(cwd: Path, *args: str) -> bytes:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, check=False, timeout=30
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout
