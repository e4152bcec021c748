"""The four files of a NoCloud seed (metadata/nocloud.py), IO-free."""

from __future__ import annotations

import email
import json

import pytest

from cloudseed.metadata import nocloud
from cloudseed.metadata.facts import KeyFacts
from tests.support.guest_facts import facts


def test_meta_data_is_json_with_what_nocloud_reads() -> None:
    doc = json.loads(nocloud.meta_data(facts(availability_zone="az1"), dhcp_domain="novalocal"))
    assert doc == {
        "instance-id": "6f2c1f55-2b1e-4a43-9b8e-3b3c8f0d9a10",
        "local-hostname": "web-1.novalocal",
        "public-keys": {"k": "ssh-ed25519 AAAA k"},
        "availability-zone": "az1",
    }
    bare = json.loads(nocloud.meta_data(facts(keys=()), dhcp_domain=""))
    assert bare == {
        "instance-id": "6f2c1f55-2b1e-4a43-9b8e-3b3c8f0d9a10",
        "local-hostname": "web-1",
    }


def test_characters_yaml_refuses_are_escaped() -> None:
    key = KeyFacts("k", "ssh", "ssh-ed25519 AAAA \x85ok \x7f\x9f\ufffe é 😀")
    body = nocloud.meta_data(facts(keys=(key,)), dhcp_domain="")
    text = body.decode()
    for refused in ("\x7f", "\x9f", "\ufffe"):
        assert refused not in text
    assert "\x85" in text and "é" in text and "😀" in text  # YAML takes these as they are
    assert json.loads(body)["public-keys"]["k"] == key.public_key


def test_user_data_is_raw_and_empty_when_none() -> None:
    assert nocloud.user_data(facts()) == b"hello"
    assert nocloud.user_data(facts(user_data=None)) == b""


def test_network_config_v2_by_mac_and_none_without_ports() -> None:
    config = nocloud.network_config(facts())
    assert config is not None
    (ethernet,) = json.loads(config)["ethernets"].values()
    assert ethernet["match"] == {"macaddress": "fa:16:3e:00:00:01"}
    assert "set-name" not in ethernet
    assert nocloud.network_config(facts(ports=())) is None
    files = nocloud.seed_files(
        facts(ports=()), dhcp_domain="", vendor_data_json=None, vendor_data2_json=b"{}"
    )
    assert sorted(files) == ["meta-data", "user-data", "vendor-data"]


@pytest.mark.parametrize(
    ("static", "dynamic", "parts"),
    [
        (None, b"{}", []),
        (b'{"cloud-init": "#cloud-config\\na: 1\\n"}', b"{}", ["#cloud-config\na: 1\n"]),
        (b'{"other": 1}', b'{"cloud-init": "#!/bin/sh\\n"}', ["#!/bin/sh\n"]),
        (b'{"cloud-init": {"a": 1}}', b'{"cloud-init": 5}', []),  # cloud-init drops these
        (
            b'["#cloud-config\\n", 3]',
            b'{"cloud-init": ["#!/bin/sh\\n"]}',
            ["#cloud-config\n", "#!/bin/sh\n"],
        ),
    ],
)
def test_vendor_data_takes_what_cloud_init_would(
    static: bytes | None, dynamic: bytes, parts: list[str]
) -> None:
    body = nocloud.vendor_data(static, dynamic)
    if len(parts) < 2:
        assert body == "".join(parts).encode()
        return
    assert body == nocloud.vendor_data(static, dynamic)  # the same bytes every time
    message = email.message_from_bytes(body)
    assert message.is_multipart()
    got = [
        bytes(p.get_payload(decode=True)).decode() for p in message.walk() if not p.is_multipart()
    ]
    assert got == parts
