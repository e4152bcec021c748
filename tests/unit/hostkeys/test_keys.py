"""Host key lines: canonical form, OpenSSH's SHA-256 fingerprint, and everything refused."""

from __future__ import annotations

import base64
import hashlib

import pytest

from cloudseed.hostkeys.errors import InvalidReport
from cloudseed.hostkeys.key_lines import MAX_LINE, HostKey, parse_host_key, same_keys
from tests.support import keys


def openssh_sha256(line: str) -> str:
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@pytest.mark.parametrize(
    "line",
    [keys.ed25519_public("root@vm1"), keys.ecdsa_public(), keys.rsa_public()],
    ids=["ed25519", "ecdsa", "rsa"],
)
def test_host_keys_are_kept_without_their_comment(line: str) -> None:
    key = parse_host_key(line + "\n")  # a .pub file, as phone_home posts it
    key_type, blob = line.split()[:2]
    assert key == HostKey(key_type, f"{key_type} {blob}", openssh_sha256(line))
    assert HostKey.from_dict(key.as_dict()) == key


def test_the_comment_may_have_spaces_and_surrounding_blanks_are_ignored() -> None:
    line = keys.ed25519_public("root@vm1 made by ssh-keygen -A")
    assert parse_host_key(f"  {line}\t\r\n").key == " ".join(line.split()[:2])


def test_same_keys_ignores_order() -> None:
    a, b = parse_host_key(keys.ed25519_public()), parse_host_key(keys.ecdsa_public())
    assert same_keys((a, b), [b, a])
    assert not same_keys((a,), (a, b))


def _blob(line: str) -> bytes:
    return base64.b64decode(line.split()[1])


def _stray_bits(line: str) -> str:
    """``line`` with the unused low bits before its base64 padding set: the same bytes to a
    lenient decoder, but not base64 as OpenSSH (or anyone) writes it."""
    key_type, text = line.split()[:2]
    assert text.endswith("=") and not text.endswith("==")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(text[-2]) | 1]
    return f"{key_type} {text[:-2]}{last}="


ED = keys.ed25519_public()
RSA = keys.rsa_public()
EC = keys.ecdsa_public()  # 104 bytes: base64 with one "=" of padding


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not an SSH public key line"),
        ("ssh-ed25519", "not an SSH public key line"),
        ("ssh-ed25519-cert-v01@openssh.com " + ED.split()[1], "no SSH host key type"),
        ("sk-ssh-ed25519@openssh.com " + ED.split()[1], "no SSH host key type"),
        ("x509 " + ED.split()[1], "no SSH host key type"),
        ("ssh-ed25519 not*base64", "not valid base64"),
        ("ssh-ed25519 " + ED.split()[1].rstrip("=") + "A", "not valid base64"),
        (_stray_bits(EC), "not as OpenSSH writes it"),
        ("ssh-ed25519 " + base64.b64encode(_blob(ED)[:-4]).decode(), "not a valid ssh-ed25519"),
        ("ssh-ed25519 " + base64.b64encode(_blob(ED) + b"\0").decode(), "not a valid"),
        ("ssh-rsa " + ED.split()[1], "not a valid ssh-rsa"),  # the blob says ed25519
        ("ssh-ed25519 " + RSA.split()[1], "not a valid ssh-ed25519"),
        (ED + "\n" + RSA, "more than one line"),
        (ED + "\r" + RSA, "more than one line"),
        ("ssh-ed25519 " + "A" * MAX_LINE, "longer than"),
        ("ssh-ed25519 AAAA\u00e9", "not valid base64"),
        ("ssh-ed25519 \ud800", "not valid base64"),
        ("\ud800 AAAA", "no SSH host key type"),
        ("9" * 5000, "not an SSH public key line"),
    ],
    ids=[
        "empty",
        "type-only",
        "certificate",
        "security-key",
        "x509",
        "not-base64",
        "bad-padding",
        "stray-bits",
        "truncated-blob",
        "trailing-data",
        "rsa-word-ed25519-blob",
        "ed25519-word-rsa-blob",
        "two-lines-lf",
        "two-lines-cr",
        "too-long",
        "non-ascii",
        "lone-surrogate-blob",
        "lone-surrogate-type",
        "digits",
    ],
)
def test_what_is_no_host_key(text: str, why: str) -> None:
    with pytest.raises(InvalidReport) as raised:
        parse_host_key(text, what="pub_key_x")
    assert why in raised.value.message
    assert raised.value.message.startswith("pub_key_x ")
