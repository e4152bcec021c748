import json

from cloudseed.injection.network import render_interfaces


def test_no_ports_no_file():
    assert render_interfaces([]) is None


def test_static_when_subnet_known_from_network_info_json():
    text = render_interfaces(
        [
            {
                "mac_address": "fa:16:3e:00:00:01",
                "network_id": "n1",
                "mtu": 1450,
                "fixed_ips": ["10.0.0.5"],
                "network_info": json.dumps(
                    {
                        "cidr": "10.0.0.0/24",
                        "gateway": "10.0.0.1",
                        "dns_nameservers": ["10.0.0.2", "bogus"],
                    }
                ),
            }
        ]
    )
    assert text is not None
    assert "auto lo\niface lo inet loopback\n" in text
    assert (
        "auto eth0\niface eth0 inet static\n    address 10.0.0.5/24\n"
        "    gateway 10.0.0.1\n    dns-nameservers 10.0.0.2\n"
        "    hwaddress ether fa:16:3e:00:00:01\n    mtu 1450\n"
    ) in text


def test_dhcp_and_slaac_when_subnet_unknown_and_ports_in_order():
    text = render_interfaces(
        [
            {"mac_address": "fa:16:3e:00:00:01", "mtu": 1500, "fixed_ips": ["2001:db8::5"]},
            {"mac_address": "fa:16:3e:00:00:02", "mtu": 1500, "fixed_ips": []},
        ]
    )
    assert text is not None
    assert "iface eth0 inet6 auto\n    # address 2001:db8::5 (subnet unknown)" in text
    assert "auto eth1\niface eth1 inet dhcp\n" in text


def test_ipv6_static_and_gateway_family_checked():
    text = render_interfaces(
        [
            {
                "fixed_ips": [{"address": "2001:db8::5"}],
                "cidr": "2001:db8::/64",
                "gateway": "10.0.0.1",
            }
        ]
    )
    assert text is not None
    assert "iface eth0 inet6 static\n    address 2001:db8::5/64\n" in text
    assert "gateway" not in text  # an IPv4 gateway does not belong to an inet6 stanza


def test_malformed_values_never_reach_the_file():
    text = render_interfaces(
        [
            {
                "mac_address": "fa:16:3e:00:00:01\nup rm -rf /",
                "mtu": True,
                "fixed_ips": ["10.0.0.5\nup evil", "10.0.0.6"],
                "cidr": "10.0.0.0/24",
                "gateway": "10.0.0.1\nup evil",
            }
        ]
    )
    assert text is not None
    assert "evil" not in text and "rm -rf" not in text and "mtu" not in text
    assert "address 10.0.0.6/24" in text
