"""The IO-free core: which document a path names, and how documents render."""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudseed.metadata import render, render_ec2, tree
from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts, PortFacts
from tests.support.guest_facts import facts


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", tree.Target(tree.EC2_INDEX)),
        ("", tree.Target(tree.EC2_INDEX)),
        ("/ec2", tree.Target(tree.EC2_INDEX_IDENTIFIED)),
        ("/openstack", tree.Target(tree.OPENSTACK_INDEX)),
        ("/openstack/", tree.Target(tree.OPENSTACK_INDEX)),
        ("/openstack/latest", tree.Target(tree.OPENSTACK_VERSION, v.EPOXY)),
        ("/openstack/2018-08-27/version", tree.Target(tree.OPENSTACK_VERSION, v.ROCKY)),
        ("/openstack/2018-08-27/meta_data.json", tree.Target(tree.META_DATA, v.ROCKY)),
        ("/openstack/a/../latest/user_data", tree.Target(tree.USER_DATA, v.EPOXY)),
        ("/openstack/content/0001", tree.Target(tree.CONTENT, rest=("0001",))),
        ("/latest/meta-data/", tree.Target(tree.EC2_META_DATA, v.EC2_LATEST)),
        (
            "/ec2/1.0/meta-data/public-keys/0",
            tree.Target(tree.EC2_META_DATA, "1.0", ("public-keys", "0")),
        ),
        ("/2009-04-04/user-data", tree.Target(tree.EC2_USER_DATA, v.EC2_LATEST)),
        ("/latest/api/token", tree.Target(tree.TOKEN)),
    ],
)
def test_paths(path: str, expected: tree.Target) -> None:
    assert tree.parse(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/openstack/2012-08-10/password",
        "/openstack/2013-04-04/vendor_data.json",
        "/openstack/2015-10-15/vendor_data2.json",
        "/openstack/latest/content",
        "/openstack/content",
        "/openstack/content/1",
        "/openstack/content/../../x",
        "/openstack/2099-01-01/meta_data.json",
        "/2010-01-01/meta-data",
        "/latest/other",
        "/latest/api/token/x",
        "/openstack/latest/meta_data.json/x",
    ],
)
def test_paths_that_name_nothing(path: str) -> None:
    assert tree.parse(path) is None


def test_meta_data_versions_and_seed() -> None:
    f = facts()
    folsom = json.loads(render.meta_data(f, v.FOLSOM, dhcp_domain="novalocal").render())
    assert list(folsom) == [
        "uuid",
        "meta",
        "public_keys",
        "keys",
        "hostname",
        "name",
        "launch_index",
        "availability_zone",
    ]
    assert folsom["hostname"] == "web-1.novalocal"
    doc = render.meta_data(f, v.EPOXY, dhcp_domain="")
    first, second = json.loads(doc.render()), json.loads(doc.render())
    assert first["hostname"] == "web-1"
    assert first["random_seed"] != second["random_seed"]
    assert len(base64.b64decode(first["random_seed"])) == 512
    assert first["devices"] == [] and first["dedicated_cpus"] == []
    assert render.meta_data_variant(v.ROCKY) == v.NEWTON_ONE
    assert render.meta_data_variant("latest") == render.meta_data_variant(v.EPOXY)


def test_meta_data_extra_cannot_override_and_files_are_listed() -> None:
    doc = json.loads(
        render.meta_data(
            facts(),
            v.EPOXY,
            dhcp_domain="d",
            extra={"admin_pass": "pw", "uuid": "evil"},
            files=[{"path": "/etc/x", "content_path": "/content/0000"}],
        ).render()
    )
    assert doc["uuid"] == facts().uuid and doc["admin_pass"] == "pw"
    assert list(doc)[:4] == ["uuid", "meta", "files", "admin_pass"]


def test_a_marker_lookalike_in_user_values_is_not_replaced() -> None:
    sneaky = facts(meta=(("x", "seed-" + "0" * 32),), name="seed-")
    doc = json.loads(render.meta_data(sneaky, v.EPOXY, dhcp_domain="").render())
    assert doc["meta"] == {"x": "seed-" + "0" * 32} and doc["name"] == "seed-"


def test_network_data() -> None:
    doc = json.loads(render.network_data(facts()))
    (link,) = doc["links"]
    assert link == {
        "id": "tap11111111-22",
        "vif_id": facts().ports[0].port_id,
        "type": "phy",
        "mtu": 1450,
        "ethernet_mac_address": "fa:16:3e:00:00:01",
    }
    (net,) = doc["networks"]  # the IPv6 address is not in the IPv4 subnet; one per family
    assert net["ip_address"] == "10.0.0.5" and net["netmask"] == "255.255.255.0"
    assert doc["services"] == [{"type": "dns", "address": "10.0.0.2"}]
    assert render.network_data(facts(ports=())) == b"{}"


def test_ec2_tree_and_listing() -> None:
    data = render_ec2.ec2_meta_data(
        facts(), v.EC2_LATEST, dhcp_domain="novalocal", local_ipv4="192.0.2.1"
    )
    assert data["instance-id"] == "i-00000007"
    assert data["ami-id"] == "ami-0a1b2c3d"
    assert data["local-ipv4"] == "10.0.0.5"
    assert render_ec2.ec2_listing({"b": 1, "a": {}, "c": []}) == b"a/\nb\nc"
    assert render_ec2.ec2_leaf(["x", "y"]) == b"x\ny"
    assert render_ec2.ec2_leaf(None) == b""
    old = render_ec2.ec2_meta_data(facts(keys=()), "1.0", dhcp_domain="", local_ipv4="x")
    assert "public-keys" not in old and "placement" not in old
    no_ipv4 = facts(ports=())
    assert (
        render_ec2.ec2_meta_data(no_ipv4, "1.0", dhcp_domain="", local_ipv4="192.0.2.9")[
            "local-ipv4"
        ]
        == "192.0.2.9"
    )
    drive = json.loads(render_ec2.ec2_meta_data_json(facts(), v.EC2_LATEST, dhcp_domain=""))
    assert drive["public-keys"] == {"0": {"openssh-key": "ssh-ed25519 AAAA k"}}


def test_ec2_security_groups_are_the_servers() -> None:
    def groups(f: GuestFacts) -> object:
        return render_ec2.ec2_meta_data(f, "1.0", dhcp_domain="", local_ipv4=None)[
            "security-groups"
        ]

    assert groups(facts(security_groups=("default", "web"))) == ["default", "web"]
    assert groups(facts()) == []
    assert render_ec2.ec2_leaf(groups(facts(security_groups=("default", "web")))) == b"default\nweb"


def test_openstack_listing() -> None:
    assert (
        render.openstack_listing(facts(user_data=None), v.FOLSOM, vendor_data_json=True)
        == b"meta_data.json"
    )
    assert render.openstack_listing(facts(), v.EPOXY, vendor_data_json=False).split() == [
        b"meta_data.json",
        b"user_data",
        b"password",
        b"network_data.json",
        b"vendor_data2.json",
    ]


# A guest's IPv4 port and its IPv6-only port.
V4_PORT = PortFacts(
    port_id="11111111-2222-3333-4444-555555555555",
    network_id="n4",
    mac="fa:16:3e:00:00:01",
    mtu=1500,
    cidr="10.0.0.0/24",
    gateway="10.0.0.1",
    dns=(),
    addresses=("10.0.0.5",),
)
V6_PORT = PortFacts(
    port_id="66666666-7777-8888-9999-000000000000",
    network_id="n6",
    mac="fa:16:3e:00:00:06",
    mtu=1500,
    cidr="fd61::/64",
    gateway="fd61::1",
    dns=(),
    addresses=("fd61::10",),
)


def test_network_data_of_a_dual_stack_guest() -> None:
    """Golden: the first address of each family that is in the port's subnet, the default
    route of that family, and the DNS servers once each across the ports."""
    v4 = dataclasses.replace(
        V4_PORT, dns=("10.0.0.2",), addresses=("10.0.0.5", "fd61::9", "10.0.0.6")
    )
    v6 = dataclasses.replace(
        V6_PORT,
        mtu=1450,
        gateway=None,
        dns=("fd61::2", "10.0.0.2"),
        addresses=("fd61::10", "fd61::11"),
    )
    doc = json.loads(render.network_data(facts(ports=(v4, v6))))
    assert [n["ip_address"] for n in doc["networks"]] == ["10.0.0.5", "fd61::10"]
    assert doc["networks"][1] == {
        "id": "network1",
        "type": "ipv6",
        "link": "tap66666666-77",
        "ip_address": "fd61::10",
        "netmask": "ffff:ffff:ffff:ffff::",
        "routes": [],
        "network_id": "n6",
        "services": [
            {"type": "dns", "address": "fd61::2"},
            {"type": "dns", "address": "10.0.0.2"},
        ],
    }
    assert doc["networks"][0]["routes"] == [
        {"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}
    ]
    assert doc["services"] == [
        {"type": "dns", "address": "10.0.0.2"},
        {"type": "dns", "address": "fd61::2"},
    ]


@given(st.ip_addresses())
def test_an_address_family_is_told_by_its_colon(address: object) -> None:
    text = str(address)
    assert render._family(text) == ipaddress.ip_address(text).version


def test_ec2_network_interfaces_for_a_guest_with_ipv6() -> None:
    """Golden: a guest with an IPv4 and an IPv6-only port gets ``mac`` and
    ``network/interfaces/macs/MAC/`` with ``ipv6s`` where the port has IPv6."""
    v4, v6 = V4_PORT, V6_PORT
    guest = facts(ports=(v4, v6), security_groups=("default",))
    data = render_ec2.ec2_meta_data(guest, v.EC2_LATEST, dhcp_domain="novalocal", local_ipv4=None)
    assert data["mac"] == "fa:16:3e:00:00:01"
    assert data["network"] == {
        "interfaces": {
            "macs": {
                "fa:16:3e:00:00:01": {
                    "device-number": "0",
                    "interface-id": "11111111-2222-3333-4444-555555555555",
                    "local-hostname": "web-1.novalocal",
                    "local-ipv4s": ["10.0.0.5"],
                    "mac": "fa:16:3e:00:00:01",
                    "security-groups": ["default"],
                    "subnet-id": "n4",
                    "subnet-ipv4-cidr-block": "10.0.0.0/24",
                },
                "fa:16:3e:00:00:06": {
                    "device-number": "1",
                    "interface-id": "66666666-7777-8888-9999-000000000000",
                    "ipv6s": ["fd61::10"],
                    "local-hostname": "web-1.novalocal",
                    "mac": "fa:16:3e:00:00:06",
                    "security-groups": ["default"],
                    "subnet-id": "n6",
                    "subnet-ipv6-cidr-blocks": ["fd61::/64"],
                },
            }
        }
    }
    interface = data["network"]["interfaces"]["macs"]["fa:16:3e:00:00:06"]
    assert render_ec2.ec2_listing(interface) == (
        b"device-number\ninterface-id\nipv6s\nlocal-hostname\nmac\nsecurity-groups\nsubnet-id\n"
        b"subnet-ipv6-cidr-blocks"
    )
    assert render_ec2.ec2_leaf(interface["ipv6s"]) == b"fd61::10"
    assert b"mac\n" in render_ec2.ec2_listing(data) and b"network/" in render_ec2.ec2_listing(data)
    # The path a guest asks, MAC and all, names the leaf.
    target = tree.parse("/latest/meta-data/network/interfaces/macs/fa:16:3e:00:00:06/ipv6s")
    assert target == tree.Target(
        tree.EC2_META_DATA,
        v.EC2_LATEST,
        ("network", "interfaces", "macs", "fa:16:3e:00:00:06", "ipv6s"),
    )
    # An IPv6-only guest: no local-ipv4, even when it asked from an IPv6 address.
    only_v6 = facts(ports=(v6,))
    assert (
        render_ec2.ec2_meta_data(only_v6, "2009-04-04", dhcp_domain="", local_ipv4="fd61::10")[
            "local-ipv4"
        ]
        is None
    )
    # Nova's tree as it was for IPv4 guests, and for the versions before 2009-04-04.
    ipv4_only = render_ec2.ec2_meta_data(
        facts(ports=(v4,)), v.EC2_LATEST, dhcp_domain="", local_ipv4=None
    )
    assert "network" not in ipv4_only
    before = render_ec2.ec2_meta_data(guest, "2008-09-01", dhcp_domain="", local_ipv4=None)
    assert "network" not in before
