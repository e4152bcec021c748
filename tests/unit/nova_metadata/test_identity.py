"""What the drop-in signs of a Nova instance (nova_metadata/identity.py): the instance as its
EC2 tree shows it, and which paths are signed identity's."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from cloudseed.identity import claims
from cloudseed.nova_metadata import identity, paths, render
from cloudseed.nova_metadata.facts import Ec2Ids, InstanceFacts, facts_from_rows
from tests.support.nova_without_nova import network_info_json

CREATED = dt.datetime(2026, 3, 4, 5, 6, 7, 891011)


def facts(*, network_info: str | None = None, ec2: Ec2Ids | None = None) -> InstanceFacts:
    row: dict[str, Any] = {
        "uuid": "8d2f0c1e-0000-4000-8000-000000000001",
        "project_id": "p1",
        "hostname": "vm",
        "display_name": "vm",
        "launch_index": 0,
        "availability_zone": "az1",
        "reservation_id": "r-00000001",
        "image_ref": "1abce000-0000-4000-8000-000000000001",
        "key_name": None,
        "key_data": None,
        "user_data": None,
        "root_device_name": "/dev/vda",
        "created_at": CREATED,
    }
    return facts_from_rows(
        row,
        extra={},
        metadata=[],
        system_metadata={},
        network_info=network_info,
        bdms=[],
        ec2=ec2 or Ec2Ids("i-0000000a", "ami-0000000b", "aki-0000000c", "ari-0000000d"),
    )


def test_the_instance_as_its_ec2_tree_shows_it() -> None:
    one = facts(network_info=network_info_json("port", "fa:16:3e:00:00:01", "10.1.2.3", "net"))
    signed = identity.instance_identity(one, "10.9.9.9")
    tree = render.ec2_tree(
        one, "2009-04-04", dhcp_domain="", address="10.9.9.9", security_groups=[]
    )
    shown = tree["meta-data"]
    assert signed.ec2_instance_id == shown["instance-id"] == "i-0000000a"
    assert signed.ec2_image_id == shown["ami-id"]
    assert (signed.ec2_kernel_id, signed.ec2_ramdisk_id) == ("aki-0000000c", "ari-0000000d")
    assert signed.private_ip == shown["local-ipv4"] == "10.1.2.3"  # not the caller's
    assert (signed.uuid, signed.project_id, signed.availability_zone) == (one.uuid, "p1", "az1")
    assert signed.image_id == one.image_ref
    document = json.loads(claims.ec2_document(signed))
    assert document["pendingTime"] == "2026-03-04T05:06:07Z"
    assert (document["kernelId"], document["ramdiskId"]) == ("aki-0000000c", "ari-0000000d")


def test_without_a_fixed_ipv4_address_the_caller_s_is_shown_as_in_local_ipv4() -> None:
    bare = facts(ec2=Ec2Ids("i-00000001", None, None, None))
    signed = identity.instance_identity(bare, "10.9.9.9")
    assert signed.private_ip == "10.9.9.9"
    document = json.loads(claims.ec2_document(signed))
    assert (document["imageId"], document["kernelId"], document["ramdiskId"]) == (None,) * 3
    assert identity.instance_identity(bare, None).private_ip is None


def test_which_paths_are_signed_identity_s() -> None:
    def target(path: str) -> paths.Target:
        parsed = paths.parse(path)
        assert parsed is not None
        return parsed

    assert identity.is_dynamic(target("/latest/dynamic/instance-identity/document"))
    assert identity.is_dynamic(target("/2009-04-04/dynamic"))
    assert not identity.is_dynamic(target("/2008-09-01/dynamic/instance-identity/document"))
    assert not identity.is_dynamic(target("/latest/meta-data/dynamic"))
    assert target("/openstack/latest/identity_token").kind == paths.IDENTITY_TOKEN
    assert paths.parse("/openstack/2025-04-04/identity_token") is None  # latest only
    assert identity.public_path("//v2.1/./instance-identity/jwks") == (
        "/v2.1/instance-identity/jwks"
    )
    assert identity.public_path("/.well-known/openid-configuration/") == (
        "/.well-known/openid-configuration"
    )
    assert identity.public_path("/v2.1/instance-identity/other") is None
