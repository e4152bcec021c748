"""Validate, fingerprint and generate key pairs.

IO-free: no sockets, files or subprocesses (generation only draws from the OS
random source inside ``cryptography``), so the API, the CLI and the tests call
it directly, without fakes.

Why the fingerprints are what they are:

* ``fingerprint`` is what Nova stores and returns, and clients compare it
  verbatim, so it is byte-for-byte Nova's: for ssh the MD5 of the decoded key
  blob, for x509 the SHA-1 of the certificate DER, as lowercase hex pairs
  joined by ``:`` (47 and 59 characters). These weak hashes only label a key
  its owner already holds; nothing is authenticated with them.
* ``fingerprint_sha256`` is what ``ssh-keygen -l`` prints by default
  (``SHA256:`` + unpadded base64), so people can match keys with their tools.
"""

from __future__ import annotations

import base64
import hashlib
import re
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cloudseed.keypairs.errors import InvalidKeypair

__all__ = ["GeneratedKey", "ParsedKey", "generate_ssh_key", "generate_x509_key", "parse_public_key"]

# Nova's comment, so generated keys look as scripts written against Nova expect.
GENERATED_COMMENT = "Generated-by-Nova"

_SSH_INVALID = "failed to generate fingerprint"

# OpenSSH's one-line format: type word, blanks, base64 blob, optional comment
# (ignored, as are any further lines). ``match`` anchors at the first byte, so
# leading whitespace is rejected, as Nova (through cryptography) rejects it.
# The blob follows a *run* of blanks: Nova validates that way but fingerprints
# ``split(" ")[1]``, so "ssh-rsa  AAAA..." (two spaces) gets the MD5 of the
# empty string -- every such key the same fingerprint. That is a Nova bug; we
# fingerprint the real blob, which is what anyone comparing with ssh-keygen
# expects.
_SSH_LINE = re.compile(rb"(\S+)[ \t]+(\S+)")

# A certificate is a signed statement about a key, not a key pair. cryptography
# 50 loads one and returns the certified key, so reject by type word instead.
_SSH_CERT_SUFFIX = b"-cert-v01@openssh.com"

# Microsoft's User Principal Name; WinRM certificate auth (cloudbase-init)
# maps the certificate to a local user through it.
_UPN_OID = x509.ObjectIdentifier("1.3.6.1.4.1.311.20.2.3")
_X509_VALIDITY = timedelta(days=3650)
_CN_MAX_BYTES = 64  # RFC 5280 ub-common-name, as cryptography counts it


@dataclass(frozen=True, slots=True)
class ParsedKey:
    type: Literal["ssh", "x509"]
    # Nova's: MD5 colon-hex of the ssh key blob, or SHA-1 colon-hex of the DER.
    fingerprint: str
    # OpenSSH's "SHA256:<unpadded base64>" of the ssh key blob or the DER.
    fingerprint_sha256: str
    # The ssh type word ("ssh-ed25519", ...), or "x509".
    algorithm: str


@dataclass(frozen=True, slots=True)
class GeneratedKey:
    public_key: str
    private_key: str
    parsed: ParsedKey


def parse_public_key(public_key: str, key_type: str = "ssh") -> ParsedKey:
    """Validate ``public_key`` and fingerprint it as Nova does.

    Raises ``InvalidKeypair`` for anything that is not a usable key of
    ``key_type``, including an unknown ``key_type``.
    """
    if key_type == "ssh":
        return _parse_ssh(public_key)
    if key_type == "x509":
        return _parse_x509(public_key)
    raise InvalidKeypair(f"unknown key type {key_type!r}")


def _parse_ssh(public_key: str) -> ParsedKey:
    try:
        # Lone surrogates survive JSON decoding but cannot be encoded.
        line = public_key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKeypair(_SSH_INVALID) from None
    match = _SSH_LINE.match(line)
    if match is None or match[1].endswith(_SSH_CERT_SUFFIX):
        raise InvalidKeypair(_SSH_INVALID)
    type_word, blob_b64 = match[1], match[2]
    # Lenient base64 (stray characters skipped), like Nova and cryptography,
    # so every key Nova imported still imports.
    try:
        blob = base64.b64decode(blob_b64)
    except ValueError:
        raise InvalidKeypair(_SSH_INVALID) from None
    # Validate the very bytes we fingerprint, re-encoded canonically, so the
    # fingerprint can never describe something other than the validated key.
    _load_ssh_key(type_word + b" " + base64.b64encode(blob), dsa=type_word == b"ssh-dss")
    return ParsedKey(
        type="ssh",
        fingerprint=hashlib.md5(blob, usedforsecurity=False).digest().hex(":"),
        fingerprint_sha256=_openssh_sha256(blob),
        algorithm=type_word.decode("ascii"),
    )


def _load_ssh_key(line: bytes, *, dsa: bool) -> None:
    try:
        if dsa:
            # cryptography still loads DSA keys but warns on each load. Nova
            # accepts them, so we do, silencing only that category, only here.
            # catch_warnings swaps process-wide filters (not thread-safe before
            # Python 3.14): a race can at worst leave cryptography's deprecation
            # warnings silenced; acceptable for a rare, deprecated key type.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CryptographyDeprecationWarning)
                serialization.load_ssh_public_key(line)
        else:
            serialization.load_ssh_public_key(line)
    except Exception as exc:
        # Untrusted bytes into a third-party parser: ValueError and
        # UnsupportedAlgorithm are documented, but any failure means "not a
        # key", a 400, never a 500.
        raise InvalidKeypair(_SSH_INVALID) from exc


def _parse_x509(public_key: str) -> ParsedKey:
    try:
        cert = x509.load_pem_x509_certificate(public_key.encode("utf-8"))
        der = cert.public_bytes(serialization.Encoding.DER)
    except Exception as exc:  # as in _load_ssh_key; Nova echoes the error text
        raise InvalidKeypair(f"failed to generate X509 fingerprint. Error message: {exc}") from exc
    return ParsedKey(
        type="x509",
        fingerprint=hashlib.sha1(der, usedforsecurity=False).digest().hex(":"),
        fingerprint_sha256=_openssh_sha256(der),
        algorithm="x509",
    )


def _openssh_sha256(data: bytes) -> str:
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def generate_ssh_key(algorithm: Literal["rsa", "ed25519"] = "rsa") -> GeneratedKey:
    """A new unencrypted key pair; the public line carries Nova's comment."""
    private: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    if algorithm == "rsa":
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        # PKCS#1 ("BEGIN RSA PRIVATE KEY"), as Nova returns; every ssh reads it.
        private_format = serialization.PrivateFormat.TraditionalOpenSSL
    elif algorithm == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
        # OpenSSH reads Ed25519 private keys only in its own container.
        private_format = serialization.PrivateFormat.OpenSSH
    else:
        raise ValueError(f"unsupported ssh key algorithm {algorithm!r}")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, private_format, serialization.NoEncryption()
    )
    public_line = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    # No trailing newline, as Nova returns it.
    public_key = f"{public_line.decode('ascii')} {GENERATED_COMMENT}"
    return GeneratedKey(
        public_key=public_key,
        private_key=private_pem.decode("ascii"),
        parsed=parse_public_key(public_key),
    )


def generate_x509_key(user_id: str, *, now: datetime | None = None) -> GeneratedKey:
    """A self-signed client certificate for WinRM, as Nova's ``openssl req``.

    ``public_key`` is the PEM certificate, ``private_key`` the base64 of a
    PKCS#12 bundle (key and certificate) opened with an empty password.
    ``user_id`` becomes the CN, so it must be 1-64 bytes in UTF-8 (X.509's
    bound, which openssl enforced for Nova too; Keystone ids are 64 at most),
    else ``ValueError``.
    """
    if not 1 <= len(user_id.encode("utf-8")) <= _CN_MAX_BYTES:
        raise ValueError(f"user_id must be 1-{_CN_MAX_BYTES} bytes to be a certificate CN")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id)])
    upn = x509.OtherName(_UPN_OID, _der_utf8_string(f"{user_id}@localhost"))
    start = now if now is not None else datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + _X509_VALIDITY)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([upn]), critical=False)
        .sign(key, hashes.SHA256())
    )
    # cryptography refuses to *encrypt* with an empty password; an unencrypted
    # bundle whose MAC is keyed with the empty password opens with an empty
    # password all the same (openssl, cryptography), as Nova's did.
    bundle = pkcs12.serialize_key_and_certificates(
        name=None, key=key, cert=cert, cas=None, encryption_algorithm=serialization.NoEncryption()
    )
    certificate = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    return GeneratedKey(
        public_key=certificate,
        private_key=base64.b64encode(bundle).decode("ascii"),
        parsed=parse_public_key(certificate, "x509"),
    )


def _der_utf8_string(text: str) -> bytes:
    # An otherName value is raw DER; cryptography has no public encoder for it.
    # The CN bound keeps "<user_id>@localhost" under 128 bytes, so the
    # one-byte (short form) length is always right.
    body = text.encode("utf-8")
    assert len(body) < 0x80, "the CN length check must come first"
    return b"\x0c" + bytes([len(body)]) + body
