"""Nova's rules the golden answers (test_render_nova34.py) do not all reach: paths, the network
model's corners, serialized objects of older versions, EC2's block device mapping, and the
change watch's stamps."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from cloudseed.nova_metadata import changes, network, objects, paths, render
from cloudseed.nova_metadata.devices import devices as shown_devices
from cloudseed.nova_metadata.facts import DEFAULT_MAPPINGS, Ec2Ids, block_devices, facts_from_rows
from tests.support.nova_golden import BARE_INSTANCE_ROW


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/ec2", paths.Target(paths.EC2_VERSIONS)),
        ("//", paths.Target(paths.EC2_VERSIONS)),  # normpath keeps a leading "//"
        ("/openstack/", paths.Target(paths.OPENSTACK_VERSIONS)),
        ("/openstack/latest/", paths.Target(paths.OPENSTACK, "2025-04-04", ("version",))),
        ("/openstack/latest/version", paths.Target(paths.OPENSTACK, "2025-04-04", ("version",))),
        (
            "/openstack/2012-08-10/network_data.json",
            paths.Target(paths.OPENSTACK, "2012-08-10", ("network_data.json",)),
        ),
        (
            "/openstack/latest/../2013-04-04/password",
            paths.Target(paths.OPENSTACK, "2013-04-04", ("password",)),
        ),
        (
            "/latest//meta-data/./hostname/",
            paths.Target(paths.EC2, "2009-04-04", ("meta-data", "hostname")),
        ),
        ("/ec2/1.0/user-data", paths.Target(paths.EC2, "1.0", ("user-data",))),
        ("/openstack/content/0000", paths.Target(paths.CONTENT, rest=("0000",))),
        ("/OpenStack/latest", None),  # an EC2 version named "OpenStack"
        ("/openstack/latest/meta_data.json/x", None),
        ("/openstack/2099-01-01/meta_data.json", None),
        ("/2099-01-01/meta-data/", None),
    ],
)
def test_paths_as_nova_reads_them(path: str, expected: paths.Target | None) -> None:
    assert paths.parse(path) == expected


def test_root_is_only_slash() -> None:
    assert paths.is_root("/") and paths.is_root("/./") and paths.is_root("/a/..")
    assert not paths.is_root("") and not paths.is_root("//")


def _subnet(cidr: str, gateway: str, ips: list[str], **meta: Any) -> dict[str, Any]:
    return {
        "cidr": cidr,
        "dns": [],
        "gateway": {"address": gateway},
        "ips": [{"address": a, "floating_ips": []} for a in ips],
        "routes": [],
        "meta": meta,
    }


def test_network_model_corners() -> None:
    vifs: list[dict[str, Any]] = [
        {"id": "p0", "address": "fa:16:3e:00:00:01", "network": None},  # no network: skipped
        {
            "id": "p1",
            "address": "fa:16:3e:00:00:02",
            "type": "bridge",  # a legacy type guests have always seen
            "network": {
                "id": "n1",
                "subnets": [
                    _subnet("10.1.0.0/24", "10.1.0.1", ["10.1.0.5"], dhcp_server="10.1.0.2")
                ],
                "meta": {"mtu": 1400},
            },
        },
        {
            "id": "p2",
            "address": "fa:16:3e:00:00:03",
            "type": "vhostuser-ish",
            "devname": "tap-p2",
            "network": {
                "id": "n2",
                "subnets": [
                    _subnet("fd00::/64", "fd00::1", ["fd00::5"], ipv6_address_mode="slaac")
                ],
                "mtu": 9000,
            },  # an extra key of the model is its meta
        },
    ]
    doc = network.network_data(vifs)
    assert doc is not None
    assert doc["links"] == [
        {
            "id": "interface0",
            "vif_id": "p1",
            "type": "bridge",
            "mtu": None,
            "ethernet_mac_address": "fa:16:3e:00:00:02",
        },
        {
            "id": "tap-p2",
            "vif_id": "p2",
            "type": "phy",
            "mtu": 9000,
            "ethernet_mac_address": "fa:16:3e:00:00:03",
        },
    ]
    assert doc["networks"][0] == {
        "id": "network0",
        "type": "ipv4_dhcp",
        "link": "interface0",
        "network_id": "n1",
    }
    assert doc["networks"][1]["type"] == "ipv6_slaac"
    assert doc["networks"][1]["netmask"] == "ffff:ffff:ffff:ffff::"
    assert doc["networks"][1]["routes"] == [
        {"network": "::", "netmask": "::", "gateway": "fd00::1"}
    ]
    assert network.network_data([]) is None
    assert network.addresses(vifs).fixed_ipv4 == ("10.1.0.5",)
    assert network.all_fixed(vifs) == ("10.1.0.5", "fd00::5")
    with pytest.raises(network.Unreadable):
        network.parse("{not json")


def _object(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"nova_object.name": name, "nova_object.version": version, "nova_object.data": data}


def test_pinned_cpus_of_every_version() -> None:
    topology = _object(
        "InstanceNUMATopology",
        "1.3",
        {
            "cells": [
                _object("InstanceNUMACell", "1.6", {"pcpuset": [5, 3], "cpuset": []}),
                # Before Victoria, a dedicated cell kept its pinned CPUs in cpuset.
                _object("InstanceNUMACell", "1.4", {"cpuset": [9, 1], "cpu_policy": "dedicated"}),
                _object("InstanceNUMACell", "1.4", {"cpuset": [7], "cpu_policy": "shared"}),
            ]
        },
    )
    assert objects.dedicated_cpus(json.dumps(topology)) == (1, 3, 5, 9)
    assert objects.dedicated_cpus(None) == ()
    assert objects.dedicated_cpus('{"cells": []}') == ()  # pre-object format: nothing pinned


def test_devices_by_version() -> None:
    devices = _object(
        "InstanceDeviceMetadata",
        "1.0",
        {
            "devices": [
                _object(
                    "NetworkInterfaceMetadata",
                    "1.2",
                    {"mac": "fa:16:3e:00:00:09", "bus": _object("PCIDeviceBus", "1.0", {})},
                ),
                _object("ShareMetadata", "1.0", {"share_id": "s1", "tag": "data"}),
                _object(
                    "DiskMetadata", "1.0", {"bus": _object("FancyBus", "1.0", {}), "tags": ["x"]}
                ),
            ]
        },
    )
    rows = {"device_metadata": json.dumps(devices)}
    facts = facts_from_rows(
        BARE_INSTANCE_ROW,
        extra=rows,
        metadata=[],
        system_metadata={},
        network_info=None,
        bdms=[],
        ec2=Ec2Ids("i-00000001", None, None, None),
    )
    # Before 2018-08-27 an untagged NIC without a VLAN is not shown; then vf_trusted shows it.
    assert shown_devices(facts, "2017-02-22") == []
    assert shown_devices(facts, "2018-08-27") == [
        {
            "vf_trusted": False,
            "type": "nic",
            "mac": "fa:16:3e:00:00:09",
            "bus": "pci",
            "address": "none",
        }
    ]
    assert shown_devices(facts, "2025-04-04")[-1] == {
        "type": "share",
        "share_id": "s1",
        "tag": "data",
        "bus": "none",
        "address": "none",
    }
    # An instance without a root device name shows Nova's default mappings; ami-id "None".
    assert facts.block_devices == DEFAULT_MAPPINGS
    tree = render.ec2_tree(facts, "2009-04-04", dhcp_domain="", address=None, security_groups=[])
    assert render.ec2_print(render.ec2_lookup(tree, ["meta-data", "ami-id"])) == b"None"
    assert render.ec2_print(render.ec2_lookup(tree, ["meta-data", "local-ipv4"])) == b"None"
    assert render.ec2_print(render.ec2_lookup(tree, ["meta-data", "security-groups"])) == b""


def test_block_device_mapping_as_nova_numbers_it() -> None:
    instance = {
        "root_device_name": "/dev/vda",
        "default_swap_device": "/dev/vdz",
        "default_ephemeral_device": None,
    }
    bdms: list[dict[str, Any]] = [
        {"source_type": "image", "destination_type": "local", "device_name": "/dev/vda"},
        {"source_type": "volume", "destination_type": "volume", "device_name": "/dev/vdf"},
        {
            "source_type": "blank",
            "destination_type": "local",
            "guest_format": "swap",
            "device_name": "/dev/vdb",
        },
        {
            "source_type": "blank",
            "destination_type": "local",
            "guest_format": None,
            "device_name": "/dev/vdc",
        },
        {"source_type": "volume", "destination_type": "volume", "device_name": None},
        {
            "source_type": "blank",
            "destination_type": "local",
            "guest_format": "ext4",
            "device_name": "/dev/vdd",
        },
    ]
    assert dict(block_devices(instance, bdms)) == {
        "ami": "vda",
        "root": "/dev/vda",
        "swap": "/dev/vdb",  # a swap mapping wins over the instance's default
        "ebs0": None,  # sorted by name, a missing name first
        "ebs1": "/dev/vdf",
        "ephemeral0": "/dev/vdc",
        "ephemeral1": "/dev/vdd",
    }


def test_the_watch_reports_a_stamp_until_it_is_over() -> None:
    cursor = changes._Cursor()
    stamp = dt.datetime(2026, 1, 1, 12, 0, 0)
    before, after = stamp - dt.timedelta(seconds=1), stamp + dt.timedelta(seconds=1)
    assert cursor.take("a", stamp, settled=before)  # new
    assert cursor.take("a", stamp, settled=before)  # not over yet: whole seconds on MySQL
    assert not cursor.take("a", stamp, settled=after)  # over, and seen
    assert cursor.take("b", stamp, settled=after)  # over, but new
    assert cursor.since == stamp
    cursor.take("c", stamp + changes.LOOKBACK * 3, settled=after)
    cursor.forget_old()
    assert ("a", stamp) not in cursor.seen


def test_the_watch_never_reports_what_was_stamped_long_before_it_started() -> None:
    start = dt.datetime(2026, 1, 1, 12, 0, 0)
    cursor = changes._Cursor(since=start, history=start - changes.HISTORY)
    old = start - changes.HISTORY - dt.timedelta(microseconds=1)
    late = start - changes.HISTORY + dt.timedelta(seconds=1)  # may have committed after start
    assert not cursor.take("old", old, settled=start)
    assert cursor.take("late", late, settled=start)
    assert cursor.take("new", start + dt.timedelta(seconds=1), settled=start)
