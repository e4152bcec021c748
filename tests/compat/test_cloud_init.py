"""cloud-init's own code reads a guest's bootstrap data from a running cloudseed metadata service.

The client is Debian's ``cloud-init`` package (22.4), run by Debian's ``/usr/bin/python3`` in a
subprocess (``tests/support/cloudinit_client.py``): cloudinit is never imported into pytest.
cloud-init cannot choose its source address, so the metadata service runs in proxy mode
(``[neutron] service_metadata_proxy``) behind a relay that names the instance in signed
X-Instance-ID headers, as Neutron's metadata proxy does (``tests/support/metadata_relay.py``).
Vendordata comes from a StaticJSON file and a DynamicJSON target named ``cloud-init`` that the
test runs.

The package is installed by the ``cloud_init`` fixture when it is missing (as root, with
apt-get); otherwise these tests skip, or fail under ``CLOUDSEED_REQUIRE_DBS=1``. The client
script says what it patches in cloud-init (only what a test host is not: DMI, NICs) and why.
cloud-init on AWS also reads the signed identity document
(``/2009-04-04/dynamic/instance-identity``, docs/identity.md), which Nova does not serve
(against Nova that crawl retries it for about 10 s).

This runs once, on SQLite: the service's behaviour on each backend is covered by
tests/functional/test_metadata_service.py.
"""

from __future__ import annotations

import base64
import gzip
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cloud import Cloud, b64, mv
from tests.support.cloudinit_run import (
    DYNAMIC_VENDORDATA,
    STATIC_VENDORDATA,
    guest_relay,
    run_cloud_init,
)
from tests.support.guests import boot
from tests.support.metadata_relay import Relay, Target

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.compat,
    # Only SQLite: overrides the session-wide backend parametrisation for this module.
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]


USER_DATA = "#cloud-config\nruncmd: [echo 'first user data é']\n"


# -- set-up ---------------------------------------------------------------------------------


# -- running cloud-init's code ----------------------------------------------------------------


def unb64(value: Any) -> bytes:
    """Bytes as the client script encodes them; cloud-init gives text for some leaves."""
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    assert isinstance(value, str), value
    return value.encode()


def misses(relay: Relay) -> set[tuple[str, str, int]]:
    return {(e.method, e.path, e.status) for e in relay.exchanges if e.status != 200}


# Newer EC2 versions that cloud-init probes for: neither Nova nor cloudseed serves them, and
# cloud-init goes on without them.
EC2_VERSION_PROBES = {
    ("GET", f"/{version}/meta-data/instance-id", 404)
    for version in ("2021-03-23", "2018-09-24", "2016-09-02")
}
# The AWS identity document, which cloudseed serves (signed: docs/identity.md).
AWS_IDENTITY = ("GET", "/2009-04-04/dynamic/instance-identity/document", 200)


# -- the tests ------------------------------------------------------------------------------


def test_cloud_init_reads_both_trees(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    target: Target,
    cloud_init: Path,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64(USER_DATA), availability_zone="nova")
    user_data = USER_DATA.encode()
    # Both crawls at once (IMDSv2's also reads the identity document).
    with (
        guest_relay(metadata_url, guest) as relay,
        guest_relay(metadata_url, guest) as aws_relay,
        run_cloud_init(cloud_init, aws_relay, guest, tmp_path / "aws", "ec2-datasource-v2") as aws,
        run_cloud_init(
            cloud_init,
            relay,
            guest,
            tmp_path / "guest",
            "openstack-reader",
            "openstack-datasource",
            "ec2-helpers",
            "ec2-datasource-v1",
        ) as run,
    ):
        out, out_aws = run.result(), aws.result()
    print(
        f"cloud-init {out['cloud_init_version']}: {run.seconds:.1f} s; "
        f"IMDSv2 datasource {aws.seconds:.1f} s"
    )

    # OpenStack tree, as read_v2() returns it and as the datasource's helpers convert it.
    reader = out["openstack-reader"]
    assert reader["version"] == "2018-08-27"
    read = reader["read_v2"]
    assert read["version"] == 2
    assert read["metadata"]["instance-id"] == read["metadata"]["uuid"] == guest.id
    assert read["metadata"]["local-hostname"] == "vm.novalocal"
    assert read["metadata"]["public_keys"] == {"key1": cloud.key1}
    assert reader["public_keys"] == [cloud.key1]
    assert unb64(read["userdata"]) == user_data
    assert read["vendordata"] == {"cloud-init": STATIC_VENDORDATA}
    assert read["vendordata2"] == {
        "static": {"cloud-init": STATIC_VENDORDATA},
        "cloud-init": DYNAMIC_VENDORDATA,
    }
    assert reader["vendordata_raw"] == STATIC_VENDORDATA
    assert reader["vendordata2_raw"] == DYNAMIC_VENDORDATA
    (link,) = read["networkdata"]["links"]
    assert link["ethernet_mac_address"] == guest.mac
    (nic,) = reader["network_config"]["config"]
    assert reader["network_config"]["version"] == 1
    assert (nic["type"], nic["name"], nic["mac_address"]) == ("physical", "eth0", guest.mac)
    (subnet,) = nic["subnets"]
    assert (subnet["type"], subnet["address"], subnet["netmask"]) == (
        "static",
        guest.address,
        "255.255.255.0",
    )
    ec2_id = read["ec2-metadata"]["instance-id"]
    assert ec2_id.startswith("i-")
    assert read["ec2-metadata"]["public-keys"] == {"key1": cloud.key1}

    # The whole OpenStack datasource.
    ds = out["openstack-datasource"]
    assert ds["get_data"] is True
    assert ds["str"] == "DataSourceOpenStack [net,ver=2]"
    assert ds["instance_id"] == ds["instance_data_v1"]["instance_id"] == guest.id
    assert ds["public_keys"] == [cloud.key1]
    assert unb64(ds["userdata_raw"]) == user_data
    assert ds["vendordata_raw"] == STATIC_VENDORDATA
    assert ds["vendordata2_raw"] == DYNAMIC_VENDORDATA
    assert ds["network_config"] == reader["network_config"]
    assert ds["availability_zone"] == "nova"
    assert ds["local_hostname"] == "vm.novalocal"
    assert (ds["platform_type"], ds["subplatform"]) == ("openstack", f"metadata ({relay.url})")
    assert ds["ec2_metadata"]["instance-id"] == ec2_id

    # EC2 tree: the crawler helpers, then the datasource without (v1) and with (v2) tokens.
    helpers = out["ec2-helpers"]
    assert helpers["meta_data"]["instance-id"] == ec2_id
    assert helpers["meta_data"]["public-keys"] == {"key1": cloud.key1}
    assert helpers["meta_data"]["placement"] == {"availability-zone": "nova"}
    assert helpers["meta_data"]["local-ipv4"] == guest.address
    assert unb64(helpers["user_data"]) == user_data
    for ec2, cloud_name in (
        (out["ec2-datasource-v1"], "unknown"),
        (out_aws["ec2-datasource-v2"], "aws"),
    ):
        assert ec2["get_data"] is True, cloud_name
        assert ec2["cloud_name"] == cloud_name
        assert ec2["used_token"] is (cloud_name == "aws")
        assert ec2["api_version"] == "2009-04-04"
        assert ec2["instance_id"] == ec2_id
        assert ec2["public_keys"] == [cloud.key1]
        assert unb64(ec2["userdata_raw"]) == user_data
        assert ec2["availability_zone"] == "nova"
        assert ec2["local_hostname"] == "vm.novalocal"

    # What went over the wire: IMDSv1 never asked for a token; IMDSv2 got one session token
    # and used it on every request after, none of which was refused.
    assert not any(
        e.method == "PUT" or "x-aws-ec2-metadata-token" in e.headers for e in relay.exchanges
    )
    assert misses(relay) <= EC2_VERSION_PROBES
    put, *gets = aws_relay.exchanges
    assert (put.method, put.path, put.status) == ("PUT", "/latest/api/token", 200)
    assert put.headers["x-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    assert len(gets) > 20
    assert len({e.headers["x-aws-ec2-metadata-token"] for e in gets}) == 1
    assert misses(aws_relay) <= EC2_VERSION_PROBES
    # On AWS, cloud-init takes the instance id and zone from the identity document: the same
    # values as the meta-data tree's (checked above).
    assert AWS_IDENTITY in {(e.method, e.path, e.status) for e in aws_relay.exchanges}

    # The DynamicJSON target was asked about this instance, in Nova's shape.
    assert target.bodies
    for body in target.bodies:
        assert (body["instance-id"], body["project-id"], body["user-data"]) == (
            guest.id,
            "proj",
            b64(USER_DATA),
        )


def test_new_user_data_reaches_the_next_crawl(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    target: Target,
    cloud_init: Path,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64(USER_DATA))
    modes = ("openstack-datasource", "ec2-datasource-v1")
    with guest_relay(metadata_url, guest) as relay:
        before = run_cloud_init(cloud_init, relay, guest, tmp_path / "before", *modes).result()
        for mode in modes:
            assert unb64(before[mode]["userdata_raw"]) == USER_DATA.encode(), mode
        # Binary user data this time: gzip, which cloud-init unpacks itself.
        new = gzip.compress(b"#cloud-config\nruncmd: [echo 'second user data']\n", mtime=0)
        r = api.put(
            f"/v2.1/servers/{guest.id}",
            json={"server": {"user_data": base64.b64encode(new).decode()}},
            headers=mv("2.105"),
        )
        assert r.status_code == 200, r.text
        after = run_cloud_init(cloud_init, relay, guest, tmp_path / "after", *modes).result()
    for mode in modes:
        assert unb64(after[mode]["userdata_raw"]) == new, mode
    assert after["openstack-datasource"]["instance_id"] == guest.id
    assert after["openstack-datasource"]["public_keys"] == [cloud.key1]
    assert target.bodies[-1]["user-data"] == base64.b64encode(new).decode()


def test_guest_posts_its_password_through_the_proxy(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    # What a guest agent posts: the new password encrypted to the key pair, base64-encoded.
    secret = base64.b64encode(os.urandom(256)).decode()
    with (
        guest_relay(metadata_url, guest) as relay,
        httpx.Client(base_url=relay.url, timeout=10) as md,
    ):
        assert md.get("/openstack/latest/password").content == b""
        r = md.post("/openstack/latest/password", content=secret.encode())
        assert r.status_code == 200, r.text
        assert md.get("/openstack/latest/password").text == secret
    r = api.get(f"/v2.1/servers/{guest.id}/os-server-password")
    assert r.status_code == 200, r.text
    assert r.json() == {"password": secret}


def test_imdsv2_through_a_proxy_that_also_sends_x_forwarded_for(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cloud_init: Path, tmp_path: Path
) -> None:
    guest = boot(api, cloud, key_name="key1")
    with guest_relay(metadata_url, guest, forwarded_for=guest.address) as relay:
        out = run_cloud_init(
            cloud_init, relay, guest, tmp_path / "aws", "ec2-datasource-v2"
        ).result()
    assert ("PUT", "/latest/api/token", 200) in {
        (e.method, e.path, e.status) for e in relay.exchanges
    }
    assert out["ec2-datasource-v2"]["get_data"] is True
