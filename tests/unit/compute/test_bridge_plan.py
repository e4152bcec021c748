"""A bridged network as plain values: names, the bridge's port security, dnsmasq's command
line and leases, and the metadata proxy's port map (compute/bridge_plan.py). What the rules
do to real frames is tests/functional/test_bridge_networks.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudseed.compute.bridge_plan import (
    BridgedNetwork,
    BridgedPort,
    bridged_ports,
    dhcp_hosts,
    dnsmasq_argv,
    host_tag,
    link_local,
    namespace_name,
    network_of_namespace,
    proxy_ports,
    ruleset,
)

PORT_A = BridgedPort(
    port_id="0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9",
    mac="fa:16:3e:12:34:56",
    addresses=("10.0.0.5",),
    instance_id="inst-a",
    tenant_id="proj",
)
PORT_V6 = BridgedPort(
    port_id="11111111-2222-3333-4444-555555555555",
    mac="fa:16:3e:00:00:0b",
    addresses=("fd00:1::5",),
    instance_id="inst-b",
    tenant_id="proj",
)
NETWORK = BridgedNetwork(
    network_id="net-1", cidr="10.0.0.0/24", gateway="10.0.0.1", mtu=1450, dns=("10.0.0.2",)
)


@pytest.mark.parametrize(
    ("mac", "address"),
    [
        ("fa:16:3e:12:34:56", "fe80::f816:3eff:fe12:3456"),
        ("52:54:00:00:00:01", "fe80::5054:ff:fe00:1"),
        ("02:00:00:00:00:00", "fe80::ff:fe00:0"),  # the U/L bit flipped back to 0
    ],
)
def test_link_local_address_is_the_modified_eui64_of_the_mac(mac: str, address: str) -> None:
    assert link_local(mac) == address


def test_names_fit_the_kernel_and_say_whose_they_are() -> None:
    assert PORT_A.device == "cst0a1b2c3d4e5f"
    assert len(PORT_A.device) <= 15  # IFNAMSIZ less the terminating NUL
    tag = host_tag(Path("/var/lib/cloudseed"), "host-a")
    assert len(tag) == 8 and tag != host_tag(Path("/var/lib/cloudseed"), "host-b")
    assert tag != host_tag(Path("/srv/other"), "host-a")
    name = namespace_name(tag, "net-1")
    assert name == f"cloudseed-{tag}-net-1"
    assert network_of_namespace(tag, name) == "net-1"
    assert network_of_namespace(tag, f"cloudseed-{tag}-") is None
    assert network_of_namespace("00000000", name) is None


def test_ruleset_lets_each_port_send_only_as_itself() -> None:
    rules = ruleset([PORT_A, PORT_V6])
    assert rules.startswith("flush ruleset\ntable bridge cloudseed {\n")
    assert "type filter hook prerouting priority 0; policy drop;" in rules
    assert 'iifname "cst0a1b2c3d4e5f" jump port-0a1b2c3d4e5f' in rules
    a = _chain(rules, "port-0a1b2c3d4e5f")
    assert a == [
        "ether saddr != fa:16:3e:12:34:56 drop",
        "ether type arp arp saddr ether fa:16:3e:12:34:56 arp saddr ip { 10.0.0.5, 0.0.0.0 } "
        "accept",
        "ether type ip udp sport 67 drop",
        "ether type ip ip saddr 0.0.0.0 udp sport 68 udp dport 67 accept",
        "ether type ip ip saddr { 10.0.0.5 } accept",
        "ether type ip6 icmpv6 type { nd-router-advert, nd-redirect } drop",
        "ether type ip6 udp sport 547 drop",
        "ether type ip6 icmpv6 type nd-neighbor-advert "
        "@th,64,128 != { 0xfe80000000000000f8163efffe123456 } drop",
        "ether type ip6 ip6 saddr { fe80::f816:3eff:fe12:3456 } accept",
        "ether type ip6 ip6 saddr :: icmpv6 type "
        "{ nd-neighbor-solicit, mld-listener-report, mld2-listener-report } accept",
        "drop",
    ]
    v6 = _chain(rules, "port-111111112222")
    assert not any("arp" in rule or "ether type ip " in rule for rule in v6)  # no IPv4 at all
    assert "ether type ip6 ip6 saddr { fe80::f816:3eff:fe00:b, fd00:1::5 } accept" in v6
    assert "cloudseed-egress" not in rules


def test_ruleset_without_ports_drops_everything_and_egress_adds_the_uplink() -> None:
    rules = ruleset([], egress=True)
    assert "jump" not in rules
    assert 'oifname "csup0" masquerade' in rules
    assert 'iifname "csup0" oifname "csbr0" ct state established,related accept' in rules


def test_dnsmasq_serves_static_leases_only_with_the_network_options(tmp_path: Path) -> None:
    argv = dnsmasq_argv("/usr/sbin/dnsmasq", NETWORK, tmp_path, [PORT_A, PORT_V6])
    assert argv[0] == "/usr/sbin/dnsmasq"
    assert "--dhcp-range=10.0.0.0,static,255.255.255.0,1h" in argv
    assert "--port=0" in argv and "--interface=csbr0" in argv and "--bind-interfaces" in argv
    assert "--dhcp-option=option:router,10.0.0.1" in argv
    assert (
        "--dhcp-option=option:classless-static-route,169.254.169.254/32,10.0.0.1,0.0.0.0/0,10.0.0.1"
    ) in argv
    assert "--dhcp-option=option:dns-server,10.0.0.2" in argv
    assert "--dhcp-option=option:mtu,1450" in argv
    assert argv[-1] == "--dhcp-host=fa:16:3e:12:34:56,10.0.0.5"  # IPv4 ports only
    assert dhcp_hosts([PORT_V6]) == []


def test_bridge_addresses() -> None:
    assert NETWORK.bridge_addresses() == [
        "10.0.0.1/24",
        "169.254.169.254/32",
        "fe80::a9fe:a9fe/64",
    ]
    v6 = BridgedNetwork(
        network_id="n", cidr="fd00:1::/64", gateway=None, mtu=1500, ec2_metadata_address=True
    )
    assert v6.bridge_addresses() == [
        "169.254.169.254/32",
        "fe80::a9fe:a9fe/64",
        "fd00:ec2::254/128",
    ]


def test_proxy_port_map_names_every_address_a_port_may_send_from() -> None:
    headers = {
        PORT_A.port_id: [["X-Instance-ID", "inst-a"]],
        PORT_V6.port_id: [["X-Instance-ID", "inst-b"]],
    }
    sources = json.loads(proxy_ports([PORT_A, PORT_V6], headers))["sources"]
    assert set(sources) == {
        "10.0.0.5",
        "fe80::f816:3eff:fe12:3456",
        "fd00:1::5",
        "fe80::f816:3eff:fe00:b",
    }
    assert sources["fd00:1::5"]["headers"] == [["X-Instance-ID", "inst-b"]]


def test_guest_ports_and_networks_from_the_guest_spec() -> None:
    ports: list[dict[str, object]] = [
        {"port_id": "p0", "mac_address": "fa:16:3e:00:00:01", "network": {"mode": "slirp"}},
        {
            "port_id": PORT_V6.port_id,
            "network_id": "net-6",
            "mac_address": "FA:16:3E:00:00:0B",
            "mtu": 1400,
            "fixed_ips": ["FD00:1::0005"],
            "network": {
                "mode": "bridge",
                "cidr": "fd00:1::/64",
                "gateway": "fd00:1::1",
                "dns_nameservers": ["fd00:1::2"],
                "ec2_metadata_address": True,
            },
        },
        {"mac_address": "fa:16:3e:00:00:03"},  # a port of before networks had modes
    ]
    ((index, port),) = bridged_ports(ports)
    assert index == 1
    network = BridgedNetwork.of_port(port)
    assert network == BridgedNetwork(
        network_id="net-6",
        cidr="fd00:1::/64",
        gateway="fd00:1::1",
        mtu=1400,
        dns=("fd00:1::2",),
        ec2_metadata_address=True,
    )
    assert BridgedNetwork.from_json(network.as_json()) == network
    bridged = BridgedPort.of_port(port, instance_id="inst-b", tenant_id="proj")
    assert bridged == PORT_V6
    assert BridgedPort.from_json(bridged.as_json()) == bridged


def _chain(rules: str, name: str) -> list[str]:
    lines = rules.splitlines()
    start = lines.index(f"  chain {name} {{") + 1
    end = lines.index("  }", start)
    return [line.strip() for line in lines[start:end]]
