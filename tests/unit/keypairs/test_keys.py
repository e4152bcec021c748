"""cloudseed.keypairs.key_material: Nova-compatible key validation, fingerprints, generation.

Expected fingerprints are computed independently of the module under test:
with hashlib over a blob built by cryptography (or by hand, for key types
cryptography cannot generate), with ssh-keygen when it is installed, and
against one golden value recorded from ssh-keygen.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from cloudseed.keypairs.errors import InvalidKeypair
from cloudseed.keypairs.key_material import (
    GeneratedKey,
    ParsedKey,
    generate_ssh_key,
    generate_x509_key,
    parse_public_key,
)

SSH_INVALID = "failed to generate fingerprint"
X509_INVALID = "failed to generate X509 fingerprint. Error message: "
MD5_OF_NOTHING = "d4:1d:8c:d9:8f:00:b2:04:e9:80:09:98:ec:f8:42:7e"
UPN_OID = x509.ObjectIdentifier("1.3.6.1.4.1.311.20.2.3")

# Generating keys is slow (RSA most of all); random garbage is cheap.
FEW = settings(max_examples=25, deadline=None)
MANY = settings(max_examples=300, deadline=None)


# --- building keys, independently of the module under test -----------------


def _sshstr(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _mpint(value: int) -> bytes:
    # RFC 4251 mpint for non-negative values: a leading zero keeps the sign bit clear.
    return _sshstr(value.to_bytes(value.bit_length() // 8 + 1, "big") if value else b"")


def _openssh_line(key: object) -> str:
    assert isinstance(
        key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return public.decode("ascii")


def _hand_built_line(type_word: str, blob: bytes) -> str:
    return f"{type_word} {base64.b64encode(blob).decode('ascii')}"


def _dsa_line() -> str:
    # Built by hand: cryptography warns when serializing DSA for ssh.
    numbers = dsa.generate_private_key(key_size=1024).public_key().public_numbers()
    params = numbers.parameter_numbers
    blob = _sshstr(b"ssh-dss") + b"".join(
        _mpint(n) for n in (params.p, params.q, params.g, numbers.y)
    )
    return _hand_built_line("ssh-dss", blob)


def _sk_ed25519_line() -> str:
    raw = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    type_word = b"sk-ssh-ed25519@openssh.com"
    return _hand_built_line(
        type_word.decode(), _sshstr(type_word) + _sshstr(raw) + _sshstr(b"ssh:")
    )


def _sk_ecdsa_line() -> str:
    point = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )
    type_word = b"sk-ecdsa-sha2-nistp256@openssh.com"
    blob = _sshstr(type_word) + _sshstr(b"nistp256") + _sshstr(point) + _sshstr(b"ssh:")
    return _hand_built_line(type_word.decode(), blob)


KEY_LINES: dict[str, Callable[[], str]] = {
    "ssh-rsa": lambda: _openssh_line(rsa.generate_private_key(65537, 2048)),
    "ecdsa-sha2-nistp256": lambda: _openssh_line(ec.generate_private_key(ec.SECP256R1())),
    "ecdsa-sha2-nistp384": lambda: _openssh_line(ec.generate_private_key(ec.SECP384R1())),
    "ecdsa-sha2-nistp521": lambda: _openssh_line(ec.generate_private_key(ec.SECP521R1())),
    "ssh-ed25519": lambda: _openssh_line(ed25519.Ed25519PrivateKey.generate()),
    "sk-ssh-ed25519@openssh.com": _sk_ed25519_line,
    "sk-ecdsa-sha2-nistp256@openssh.com": _sk_ecdsa_line,
    "ssh-dss": _dsa_line,
}


def _blob(line: str) -> bytes:
    return base64.b64decode(line.split()[1])


def _md5_colon(data: bytes) -> str:
    return ":".join(f"{byte:02x}" for byte in hashlib.md5(data).digest())


def _sha1_colon(data: bytes) -> str:
    return ":".join(f"{byte:02x}" for byte in hashlib.sha1(data).digest())


def _sha256_openssh(data: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def _self_signed_pem() -> tuple[str, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    return pem, cert.public_bytes(serialization.Encoding.DER)


def _invalid_reason(public_key: str, key_type: str = "ssh") -> str:
    with pytest.raises(InvalidKeypair) as excinfo:
        parse_public_key(public_key, key_type)
    return excinfo.value.reason


# --- ssh-keygen, an independent implementation -----------------------------


@pytest.fixture
def ssh_keygen() -> Callable[..., str]:
    exe = shutil.which("ssh-keygen")
    if exe is None:
        pytest.skip("ssh-keygen is not installed; the hashlib cross-checks still run")

    def run(*args: str) -> str:
        env = {"LC_ALL": "C", "PATH": os.environ.get("PATH", "")}
        done = subprocess.run(
            [exe, *args], check=True, capture_output=True, text=True, timeout=30, env=env
        )
        return done.stdout

    return run


def _keygen_fingerprint(run: Callable[..., str], tmp_path: Path, line: str, digest: str) -> str:
    path = tmp_path / "key.pub"
    path.write_text(line + " comment\n")
    # Output: "<bits> <DIGEST>:<fingerprint> <comment> (<TYPE>)".
    return run("-l", "-E", digest, "-f", str(path)).split()[1]


# --- ssh: accepted key types ------------------------------------------------


@pytest.mark.parametrize("type_word", sorted(KEY_LINES))
def test_every_openssh_key_type_is_fingerprinted_like_nova(type_word: str) -> None:
    line = KEY_LINES[type_word]()

    parsed = parse_public_key(line)

    assert parsed == ParsedKey(
        type="ssh",
        fingerprint=_md5_colon(_blob(line)),
        fingerprint_sha256=_sha256_openssh(_blob(line)),
        algorithm=type_word,
    )
    assert len(parsed.fingerprint) == 47


@pytest.mark.parametrize("type_word", sorted(KEY_LINES))
def test_fingerprints_agree_with_ssh_keygen(
    type_word: str, ssh_keygen: Callable[..., str], tmp_path: Path
) -> None:
    line = KEY_LINES[type_word]()

    parsed = parse_public_key(line)

    assert _keygen_fingerprint(ssh_keygen, tmp_path, line, "md5") == "MD5:" + parsed.fingerprint
    assert _keygen_fingerprint(ssh_keygen, tmp_path, line, "sha256") == parsed.fingerprint_sha256


def test_golden_ed25519_fingerprints_recorded_from_ssh_keygen() -> None:
    key = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32)))

    parsed = parse_public_key(_openssh_line(key) + " golden")

    assert parsed.fingerprint == "f1:02:17:de:ef:c1:30:83:11:8b:82:a0:0e:67:7f:d5"
    assert parsed.fingerprint_sha256 == "SHA256:lbmsoA0yIEcEiVDRnMWuzm+nV+3ZEEpVIURqFoeSspg"


@pytest.mark.parametrize("ending", ["\n", "\r\n", " user@host\n", " a comment with spaces\n"])
def test_trailing_newline_and_comments_do_not_change_the_fingerprint(ending: str) -> None:
    line = KEY_LINES["ssh-ed25519"]()

    assert parse_public_key(line + ending).fingerprint == _md5_colon(_blob(line))


@pytest.mark.parametrize("separator", ["  ", "\t", " \t "])
def test_blank_runs_fingerprint_the_real_blob_not_novas_empty_one(separator: str) -> None:
    type_word, blob_b64 = KEY_LINES["ssh-ed25519"]().split()

    parsed = parse_public_key(f"{type_word}{separator}{blob_b64} comment")

    assert parsed.fingerprint == _md5_colon(base64.b64decode(blob_b64))
    assert parsed.fingerprint != MD5_OF_NOTHING


def test_multi_line_input_is_fingerprinted_by_its_first_key() -> None:
    first, second = KEY_LINES["ssh-ed25519"](), KEY_LINES["ecdsa-sha2-nistp256"]()

    assert parse_public_key(f"{first}\n{second}\n").fingerprint == _md5_colon(_blob(first))


def test_dsa_is_accepted_without_leaking_cryptographys_deprecation_warning() -> None:
    line = _dsa_line()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parsed = parse_public_key(line)

    assert caught == []
    assert parsed.algorithm == "ssh-dss"


# --- ssh: rejected input ----------------------------------------------------


@pytest.mark.parametrize("prefix", [" ", "\t", "\n"])
def test_leading_whitespace_is_rejected_as_by_nova(prefix: str) -> None:
    assert _invalid_reason(prefix + KEY_LINES["ssh-ed25519"]()) == SSH_INVALID


@pytest.mark.parametrize(
    "make_key",
    [
        ed25519.Ed25519PrivateKey.generate,
        lambda: ec.generate_private_key(ec.SECP384R1()),
        lambda: rsa.generate_private_key(65537, 2048),
    ],
)
def test_openssh_certificates_are_rejected(make_key: Callable[[], object]) -> None:
    subject = make_key()
    assert isinstance(
        subject, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey)
    )
    certificate = (
        serialization.SSHCertificateBuilder()
        .public_key(subject.public_key())
        .serial(1)
        .type(serialization.SSHCertificateType.USER)
        .key_id(b"alice")
        .valid_principals([b"alice"])
        .valid_after(0)
        .valid_before(2**64 - 1)
        .sign(ed25519.Ed25519PrivateKey.generate())
    )
    line = certificate.public_bytes().decode()
    assert "-cert-v01@openssh.com " in line

    assert _invalid_reason(line) == SSH_INVALID


def _garbage() -> list[str]:
    ed_type, ed_b64 = KEY_LINES["ssh-ed25519"]().split()
    rsa_b64 = KEY_LINES["ssh-rsa"]().split()[1]
    trailing_data = base64.b64encode(base64.b64decode(ed_b64) + b"x").decode()
    private_pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    return [
        "",
        "\n",
        "garbage",
        ed_type,
        ed_type + " ",
        f"{ed_type}\n{ed_b64}",
        f"ssh-ed25519 {rsa_b64}",  # type word and blob disagree
        f"ssh-foo {ed_b64}",
        f"{ed_type} {trailing_data}",  # bytes after the key inside the blob
        f"{ed_type} {ed_b64[:-8]}",  # truncated
        f"{ed_type} !!!!",
        f"{ed_type} A",  # bad padding
        f'command="true" {ed_type} {ed_b64}',  # authorized_keys options
        private_pem.decode(),
        _self_signed_pem()[0],
        f"{ed_type} {ed_b64} \ud800",  # lone surrogate, survives JSON decoding
    ]


_GARBAGE = _garbage()


# Fixed ids: the values hold fresh random keys, and pytest-xdist workers must collect the
# same test names.
@pytest.mark.parametrize("public_key", _GARBAGE, ids=[f"garbage{i}" for i in range(len(_GARBAGE))])
def test_garbage_is_rejected_with_novas_exact_message(public_key: str) -> None:
    with pytest.raises(InvalidKeypair) as excinfo:
        parse_public_key(public_key)

    assert excinfo.value.reason == SSH_INVALID
    assert str(excinfo.value) == "Keypair data is invalid: failed to generate fingerprint"


@pytest.mark.parametrize("key_type", ["", "SSH", "pgp", "x.509"])
def test_unknown_key_types_are_rejected(key_type: str) -> None:
    with pytest.raises(InvalidKeypair):
        parse_public_key(KEY_LINES["ssh-ed25519"](), key_type)


# --- x509 -------------------------------------------------------------------


def test_x509_fingerprint_is_sha1_of_der() -> None:
    pem, der = _self_signed_pem()

    parsed = parse_public_key(pem, "x509")

    assert parsed == ParsedKey(
        type="x509",
        fingerprint=_sha1_colon(der),
        fingerprint_sha256=_sha256_openssh(der),
        algorithm="x509",
    )
    assert len(parsed.fingerprint) == 59


@pytest.mark.parametrize(
    "public_key",
    ["", "garbage", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "\ud800"],
)
def test_x509_garbage_is_rejected_with_the_error_text(public_key: str) -> None:
    reason = _invalid_reason(public_key, "x509")

    assert reason.startswith(X509_INVALID)
    assert len(reason) > len(X509_INVALID)


def test_an_ssh_key_is_not_a_certificate() -> None:
    assert _invalid_reason(KEY_LINES["ssh-ed25519"](), "x509").startswith(X509_INVALID)


# --- generation -------------------------------------------------------------


def _assert_generated_ssh(generated: GeneratedKey, type_word: str, private: object) -> None:
    assert generated.public_key.startswith(type_word + " ")
    assert generated.public_key.endswith(" Generated-by-Nova")
    assert generated.parsed == parse_public_key(generated.public_key)
    assert generated.parsed.fingerprint == _md5_colon(_blob(generated.public_key))
    # The private key belongs to the public one.
    assert _openssh_line(private) == generated.public_key.removesuffix(" Generated-by-Nova")


def test_generated_rsa_key_is_novas_pkcs1_2048() -> None:
    generated = generate_ssh_key()

    assert generated.private_key.startswith("-----BEGIN RSA PRIVATE KEY-----\n")
    private = serialization.load_pem_private_key(generated.private_key.encode(), None)
    assert isinstance(private, rsa.RSAPrivateKey)
    assert private.key_size == 2048
    _assert_generated_ssh(generated, "ssh-rsa", private)


def test_generated_ed25519_key_uses_the_openssh_container() -> None:
    generated = generate_ssh_key("ed25519")

    assert generated.private_key.startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    private = serialization.load_ssh_private_key(generated.private_key.encode(), None)
    assert isinstance(private, ed25519.Ed25519PrivateKey)
    _assert_generated_ssh(generated, "ssh-ed25519", private)


@pytest.mark.parametrize("algorithm", ["rsa", "ed25519"])
def test_openssh_reads_the_generated_private_key(
    algorithm: Literal["rsa", "ed25519"], ssh_keygen: Callable[..., str], tmp_path: Path
) -> None:
    generated = generate_ssh_key(algorithm)
    path = tmp_path / "id"
    path.write_text(generated.private_key)
    path.chmod(0o600)  # ssh-keygen refuses keys others can read

    derived = ssh_keygen("-y", "-f", str(path)).strip()

    assert derived.split()[:2] == generated.public_key.split()[:2]


def test_unknown_generation_algorithm_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="dsa"):
        generate_ssh_key("dsa")  # type: ignore[arg-type]


def test_generated_x509_certificate_is_novas_winrm_client_certificate() -> None:
    now = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)

    generated = generate_x509_key("alice", now=now)

    cert = x509.load_pem_x509_certificate(generated.public_key.encode())
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    cert.verify_directly_issued_by(cert)
    assert cert.not_valid_before_utc == now
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=3650)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # UPN as a DER UTF8String: tag 0x0c, short-form length, the bytes.
    assert san.get_values_for_type(x509.OtherName) == [
        x509.OtherName(UPN_OID, b"\x0c\x0f" + b"alice@localhost")
    ]
    public = cert.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    assert public.key_size == 2048
    der = cert.public_bytes(serialization.Encoding.DER)
    assert generated.parsed.fingerprint == _sha1_colon(der)
    assert generated.parsed == parse_public_key(generated.public_key, "x509")


def test_generated_pkcs12_opens_with_an_empty_password() -> None:
    generated = generate_x509_key("alice")

    key, cert, extra = pkcs12.load_key_and_certificates(
        base64.b64decode(generated.private_key, validate=True), b""
    )

    assert cert is not None
    assert key is not None
    assert extra == []
    assert cert.public_bytes(serialization.Encoding.PEM).decode() == generated.public_key
    assert key.public_key() == cert.public_key()


def test_a_64_byte_non_ascii_user_id_fills_the_common_name() -> None:
    user_id = "é" * 32  # 64 bytes in UTF-8, the most a CN may hold

    cert = x509.load_pem_x509_certificate(generate_x509_key(user_id).public_key.encode())

    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user_id
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    upn = f"{user_id}@localhost".encode()
    assert san.get_values_for_type(x509.OtherName)[0].value == b"\x0c" + bytes([len(upn)]) + upn


@pytest.mark.parametrize("user_id", ["", "u" * 65, "é" * 33])
def test_user_ids_that_cannot_be_a_common_name_are_refused(user_id: str) -> None:
    with pytest.raises(ValueError, match="user_id must be 1-64 bytes"):
        generate_x509_key(user_id)


# --- properties -------------------------------------------------------------

PRINTABLE = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp"))
CHEAP_KEYS: dict[str, Callable[[], object]] = {
    "ed25519": ed25519.Ed25519PrivateKey.generate,
    "p256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "p384": lambda: ec.generate_private_key(ec.SECP384R1()),
    "p521": lambda: ec.generate_private_key(ec.SECP521R1()),
    "rsa": lambda: rsa.generate_private_key(65537, 2048),
}


@FEW
@given(
    kind=st.sampled_from(["ed25519", "ed25519", "p256", "p384", "p521", "rsa"]),
    separator=st.sampled_from([" ", "  ", "\t"]),
    comment=st.none() | st.text(PRINTABLE, max_size=40),
    ending=st.sampled_from(["", "\n", "\r\n"]),
)
def test_any_valid_key_parses_to_the_md5_of_its_blob(
    kind: str, separator: str, comment: str | None, ending: str
) -> None:
    type_word, blob_b64 = _openssh_line(CHEAP_KEYS[kind]()).split()
    line = f"{type_word}{separator}{blob_b64}"
    if comment is not None:
        line += f" {comment}"

    parsed = parse_public_key(line + ending)

    assert parsed.fingerprint == _md5_colon(base64.b64decode(blob_b64))
    assert parsed.algorithm == type_word


@MANY
@given(text=st.text(), key_type=st.sampled_from(["ssh", "x509"]) | st.text(max_size=5))
def test_random_text_only_ever_raises_invalid_keypair(text: str, key_type: str) -> None:
    try:
        parsed = parse_public_key(text, key_type)
    except InvalidKeypair:
        return
    assert parsed.type == key_type  # only reachable if hypothesis wrote a real key


@MANY
@given(
    type_word=st.sampled_from([*sorted(KEY_LINES), "ssh-rsa-cert-v01@openssh.com"]),
    with_header=st.booleans(),
    payload=st.binary(max_size=300),
    tail=st.text(max_size=20),
)
def test_random_blobs_after_a_valid_type_word_only_raise_invalid_keypair(
    type_word: str, with_header: bool, payload: bytes, tail: str
) -> None:
    # The header gets random bytes past the type check into the key parsers.
    blob = (_sshstr(type_word.encode()) if with_header else b"") + payload
    try:
        parsed = parse_public_key(f"{_hand_built_line(type_word, blob)} {tail}")
    except InvalidKeypair as exc:
        assert exc.reason == SSH_INVALID
    else:
        # Any 32 bytes after an ed25519 header are a key, so success is legitimate.
        assert parsed.fingerprint == _md5_colon(blob)
