"""Nova's injected network template as the drop-in writes it (nova_metadata/interfaces.py):
which interfaces, numbered how, and the file's bytes (the expected texts are what Nova 34's
own template rendered for these VIFs; tests/compat/ compares with a live Nova too)."""

from __future__ import annotations

import json
from typing import Any

from cloudseed.nova_metadata import interfaces, paths, render
from cloudseed.nova_metadata.facts import Ec2Ids, InstanceFacts, facts_from_rows
from tests.support.nova_golden import BARE_INSTANCE_ROW

HEADER = (
    "# Injected by Nova on instance boot\n#\n"
    "# This file describes the network interfaces available on your system\n"
    "# and how to activate them. For more information, see interfaces(5).\n\n"
    "# The loopback network interface\nauto lo\niface lo inet loopback\n"
)


def subnet(
    cidr: str,
    ips: list[str],
    *,
    gateway: str | None = None,
    dns: tuple[str, ...] = (),
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "cidr": cidr,
        "ips": [{"address": a, "type": "fixed", "meta": {}, "floating_ips": []} for a in ips],
        "gateway": {"address": gateway, "type": "gateway", "meta": {}} if gateway else {},
        "dns": [{"address": d, "type": "dns", "meta": {}} for d in dns],
        "routes": [],
        "meta": meta or {},
    }


def vif(mac: str, subnets: list[dict[str, Any]], *, injected: bool = True) -> dict[str, Any]:
    network = {"id": "n", "bridge": "br", "label": "l", "subnets": subnets}
    return {
        "id": "port-" + mac,
        "address": mac,
        "network": {**network, "meta": {"injected": injected}},
        "type": "ovs",
    }


MIXED = [
    vif("fa:16:3e:00:00:03", [subnet("10.2.0.0/24", ["10.2.0.5"], meta={"dhcp_server": "x"})]),
    vif("fa:16:3e:00:00:04", [subnet("10.3.0.0/24", ["10.3.0.5"])], injected=False),
    vif("fa:16:3e:00:00:05", []),  # no subnets: not numbered
    vif("fa:16:3e:00:00:06", [subnet("10.4.0.4/31", ["10.4.0.5"], gateway="10.4.0.4")]),
    vif("fa:16:3e:00:00:07", [subnet("fd00:7::/64", ["fd00:7::5"])]),
    vif(
        "fa:16:3e:00:00:08",
        [subnet("10.8.0.0/16", []), subnet("fd00:8::/48", ["fd00:8::9"], gateway="fd00:8::1")],
    ),
]


def test_numbering_dhcp_and_not_injected_networks_as_nova() -> None:
    assert (
        interfaces.network_template(MIXED)
        == (
            HEADER + "\nauto eth2\niface eth2 inet static\n    hwaddress ether fa:16:3e:00:00:06\n"
            "    address 10.4.0.5\n    netmask 255.255.255.254\n    broadcast None\n"
            "    gateway 10.4.0.4\n\nauto eth3\niface eth3 inet6 static\n"
            "    hwaddress ether fa:16:3e:00:00:07\n    address fd00:7::5\n    netmask 64\n"
            "\nauto eth4\niface eth4 inet6 static\n    hwaddress ether fa:16:3e:00:00:08\n"
            "    address fd00:8::9\n    netmask 48\n    gateway fd00:8::1\n"
        ).encode()
    )


def test_ipv4_and_ipv6_with_dns() -> None:
    both = [
        vif(
            "fa:16:3e:00:00:02",
            [
                subnet("10.1.0.0/24", ["10.1.0.5"], gateway="10.1.0.1", dns=("8.8.8.8", "1.1.1.1")),
                subnet("fd00:1::/64", ["fd00:1::5"], gateway="fd00:1::1", dns=("fd00::53",)),
            ],
        )
    ]
    assert (
        interfaces.network_template(both)
        == (
            HEADER + "\nauto eth0\niface eth0 inet static\n    hwaddress ether fa:16:3e:00:00:02\n"
            "    address 10.1.0.5\n    netmask 255.255.255.0\n    broadcast 10.1.0.255\n"
            "    gateway 10.1.0.1\n    dns-nameservers 8.8.8.8 1.1.1.1\n"
            "iface eth0 inet6 static\n    hwaddress ether fa:16:3e:00:00:02\n"
            "    address fd00:1::5\n    netmask 64\n    gateway fd00:1::1\n"
            "    dns-nameservers fd00::53\n"
        ).encode()
    )


def test_nothing_when_no_interface_qualifies() -> None:
    assert interfaces.network_template(None) is None
    assert interfaces.network_template(MIXED[:3]) is None
    # A DHCP server on the IPv6 subnet leaves the whole interface out, as on the IPv4 one.
    v6_dhcp = subnet("fd00:9::/64", ["fd00:9::5"], meta={"dhcp_server": "fd00:9::2"})
    assert (
        interfaces.network_template([vif("m", [subnet("10.9.0.0/24", ["10.9.0.5"]), v6_dhcp])])
        is None
    )


def facts(vifs: list[dict[str, Any]]) -> InstanceFacts:
    return facts_from_rows(
        BARE_INSTANCE_ROW,
        extra={},
        metadata=[("a", "1")],
        system_metadata={},
        network_info=json.dumps(vifs),
        bdms=[],
        ec2=Ec2Ids("i-00000001", None, None, None),
    )


def test_network_config_and_its_content_only_where_rendered() -> None:
    injected = facts(MIXED)
    content = paths.parse("/openstack/content/0000")
    assert content is not None
    on = render.Inputs(dhcp_domain="", network_template=True)
    assert render.document(content, injected, on) == (injected.network_config, render.TEXT)
    meta = json.loads(
        render.meta_data(injected, "2025-04-04", dhcp_domain="", network_template=True).render()
    )
    assert list(meta)[:3] == ["uuid", "meta", "network_config"]  # Nova's order
    assert meta["network_config"] == {"name": "network_config", "content_path": "/content/0000"}
    off = render.Inputs(dhcp_domain="")
    for target, inputs, instance in (
        (content, off, injected),  # a template of the operator's own: not rendered
        (content, on, facts(MIXED[:3])),  # nothing injected
        (paths.parse("/openstack/content/0001"), on, injected),
        (paths.parse("/openstack/content/0000/x"), on, injected),
        (paths.parse("/openstack/content"), on, injected),
    ):
        assert target is not None
        try:
            render.document(target, instance, inputs)
        except render.NotInTree:
            continue
        raise AssertionError(f"{target} was rendered")
    plain = json.loads(render.meta_data(injected, "2025-04-04", dhcp_domain="").render())
    assert "network_config" not in plain
