"""The phone_home form: what cloud-init 22.4 posts, and every body refused before anything is
stored."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from cloudseed.errors import Forbidden, InvalidInput
from cloudseed.hostkeys.errors import InvalidReport, ReportForAnother
from cloudseed.hostkeys.key_lines import parse_host_key
from cloudseed.hostkeys.phone_home import MAX_BODY, MAX_FIELDS, parse_report
from tests.support import keys

UUID = "3f0c8d2e-9b7a-4c1e-8f5d-2a6b1c9e0d47"
FORM = "application/x-www-form-urlencoded"
ED, EC, RSA = keys.ed25519_public("root@vm1"), keys.ecdsa_public(), keys.rsa_public()


def cloud_init_body(**changes: str | None) -> bytes:
    """The body cc_phone_home sends with ``post: all``: its POST_LIST_ALL order, each key file
    as read (with its newline), "N/A" for a file it could not read, encoded by requests
    (``urlencode`` of the dict, which is what requests does)."""
    fields: dict[str, str | None] = {
        "pub_key_dsa": "N/A",
        "pub_key_rsa": RSA + "\n",
        "pub_key_ecdsa": EC + "\n",
        "pub_key_ed25519": ED + "\n",
        "instance_id": UUID,
        "hostname": "vm1",
        "fqdn": "vm1.novalocal",
        **changes,
    }
    return urlencode({k: v for k, v in fields.items() if v is not None}).encode()


def test_what_cloud_init_posts() -> None:
    report = parse_report(cloud_init_body(), FORM, caller=UUID)
    assert report.instance_id == UUID
    assert (report.hostname, report.fqdn) == ("vm1", "vm1.novalocal")
    assert report.keys == tuple(parse_host_key(k) for k in (RSA, EC, ED))


def test_a_post_list_with_only_some_fields_and_unknown_names() -> None:
    body = urlencode(
        {"instance_id": UUID, "pub_key_ed25519": ED, "pub_key_foo": "N/A", "other": "x"}
    ).encode()
    report = parse_report(body, None, caller=UUID)
    assert report.keys == (parse_host_key(ED),)
    assert report.hostname is report.fqdn is None


def test_the_content_type_may_carry_a_charset_or_be_missing() -> None:
    for content_type in (None, "", FORM, "Application/X-WWW-Form-Urlencoded; charset=utf-8"):
        parse_report(cloud_init_body(), content_type, caller=UUID)


def test_another_instances_id_is_forbidden() -> None:
    other = "0e5d6c1a-1111-4c1e-8f5d-2a6b1c9e0d47"
    for claimed in (other, "N/A", "9" * 5000, UUID.upper(), UUID + " "):
        with pytest.raises(ReportForAnother) as raised:
            parse_report(cloud_init_body(instance_id=claimed), FORM, caller=UUID)
        assert isinstance(raised.value, Forbidden)
        assert "its own host keys only" in raised.value.message


BAD: list[tuple[str, bytes, str | None, str]] = [
    ("json", b'{"instance_id": "x"}', "application/json", "is a form"),
    ("multipart", cloud_init_body(), "multipart/form-data; boundary=x", "is a form"),
    ("not-ascii", "instance_id=\u00e9".encode(), FORM, "outside ASCII"),
    ("bad-utf8", b"instance_id=%FF", FORM, "not valid UTF-8"),
    ("lone-surrogate", b"hostname=%ED%A0%80&instance_id=" + UUID.encode(), FORM, "UTF-8"),
    ("no-equals", b"instance_id", FORM, "not form-encoded"),
    ("too-many-fields", b"&".join([b"a=1"] * (MAX_FIELDS + 1)), FORM, "more than"),
    ("too-large", b"a=" + b"1" * MAX_BODY, FORM, "larger than"),
    ("twice", cloud_init_body() + b"&pub_key_rsa=N%2FA", FORM, "more than once"),
    ("no-instance-id", cloud_init_body(instance_id=None), FORM, "no instance_id"),
    ("empty-instance-id", cloud_init_body(instance_id=""), FORM, "no instance_id"),
    ("empty", b"", FORM, "no instance_id"),
    (
        "no-key",
        cloud_init_body(pub_key_rsa="N/A", pub_key_ecdsa=None, pub_key_ed25519=""),
        FORM,
        "no host key",
    ),
    ("key-in-wrong-field", cloud_init_body(pub_key_rsa=ED), FORM, "pub_key_rsa holds"),
    ("invalid-key", cloud_init_body(pub_key_ed25519="ssh-ed25519 AAAA"), FORM, "pub_key_ed25519"),
    ("digits-key", cloud_init_body(pub_key_rsa="9" * 5000), FORM, "pub_key_rsa"),
    (
        "cert",
        cloud_init_body(pub_key_ed25519="ssh-ed25519-cert-v01@openssh.com AAAA"),
        FORM,
        "no SSH host key type",
    ),
    ("long-hostname", cloud_init_body(hostname="9" * 5000), FORM, "hostname is longer"),
    ("nul-hostname", cloud_init_body(hostname="vm\x001"), FORM, "control characters"),
    ("newline-fqdn", cloud_init_body(fqdn="vm1\nx"), FORM, "control characters"),
]


@pytest.mark.parametrize(("name", "body", "content_type", "why"), BAD, ids=[b[0] for b in BAD])
def test_refused(name: str, body: bytes, content_type: str | None, why: str) -> None:
    with pytest.raises(InvalidReport) as raised:
        parse_report(body, content_type, caller=UUID)
    assert isinstance(raised.value, InvalidInput)
    assert why in raised.value.message, raised.value.message
