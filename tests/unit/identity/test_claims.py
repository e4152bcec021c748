"""cloudseed.identity.claims: EC2's document, the token's claims, the audience's checks."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from cloudseed.identity import claims
from cloudseed.identity.errors import BadAudience

INSTANCE = claims.InstanceIdentity(
    uuid="6f2c1f55-2b1e-4a43-9b8e-3b3c8f0d9a10",
    ec2_instance_id="i-00000007",
    ec2_image_id="ami-0a1b2c3d",
    image_id="0a1b2c3d-0000-4000-8000-000000000000",
    project_id="proj",
    flavor="m1.tiny",
    availability_zone="nova",
    private_ip="10.0.0.5",
    created_at=dt.datetime(2026, 11, 25, 3, 4, 5, 678901),
)


def test_ec2_document_has_ec2s_fields_order_and_layout() -> None:
    body = claims.ec2_document(INSTANCE)
    document = json.loads(body)
    assert list(document) == [
        "accountId",
        "architecture",
        "availabilityZone",
        "billingProducts",
        "devpayProductCodes",
        "marketplaceProductCodes",
        "imageId",
        "instanceId",
        "instanceType",
        "kernelId",
        "pendingTime",
        "privateIp",
        "ramdiskId",
        "region",
        "version",
    ]
    assert document["accountId"] == "proj"
    assert document["architecture"] == "x86_64"
    assert document["instanceId"] == "i-00000007"
    assert document["imageId"] == "ami-0a1b2c3d"
    assert document["instanceType"] == "m1.tiny"
    assert document["pendingTime"] == "2026-11-25T03:04:05Z"
    assert document["privateIp"] == "10.0.0.5"
    assert document["region"] == document["availabilityZone"] == "nova"
    assert document["version"] == "2017-09-30"
    assert document["kernelId"] is None and document["billingProducts"] is None
    assert body.startswith(b'{\n  "accountId" : "proj",\n  "architecture" : "x86_64",')


def test_ec2_document_region_setting_wins() -> None:
    assert json.loads(claims.ec2_document(INSTANCE, region="east"))["region"] == "east"


def test_token_claims_are_the_listed_ones() -> None:
    found = claims.token_claims(
        INSTANCE,
        issuer="https://c.example",
        audience="vault",
        now=100,
        ttl=600,
        jti="j",
        host_keys=["SHA256:abc"],
    )
    assert tuple(found) == claims.CLAIMS
    assert found["sub"] == INSTANCE.uuid and found["aud"] == "vault"
    assert (found["iat"], found["nbf"], found["exp"]) == (100, 100, 700)
    assert found["image_id"] == INSTANCE.image_id and found["flavor"] == "m1.tiny"
    assert found["host_keys"] == ["SHA256:abc"]


@pytest.mark.parametrize(
    ("query", "audience"),
    [
        (b"audience=vault", "vault"),
        (b"audience=https%3A%2F%2Fvault.example%3A8200", "https://vault.example:8200"),
        (b"audience=a+b", "a b"),
        (b"audience=%C3%BC%F0%9F%98%80", "\u00fc\U0001f600"),
        (b"audience=" + b"x" * 255, "x" * 255),
    ],
)
def test_good_audiences(query: bytes, audience: str) -> None:
    assert claims.audience_of(query) == audience


@pytest.mark.parametrize(
    "query",
    [
        b"",
        b"audience",
        b"audience=",
        b"audience=" + b"x" * 256,
        b"audience=%ED%A0%80",  # a lone surrogate, UTF-8 encoded
        b"audience=%FF",
        b"audience=\xc3\xbc",  # raw bytes outside ASCII
        b"audience=a%00b",
        b"audience=a%0Ab",
        b"audience=%E2%80%8B",  # zero-width space: not printable
        b"audience=a&audience=b",
        b"audience=a&other=b",
        b"Audience=a",
        b"&".join([b"audience=a"] * 20),
    ],
)
def test_bad_audiences(query: bytes) -> None:
    with pytest.raises(BadAudience):
        claims.audience_of(query)
