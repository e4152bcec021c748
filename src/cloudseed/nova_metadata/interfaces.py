"""Nova's injected network template: an ``/etc/network/interfaces`` file for guests on networks
without DHCP, served as ``/openstack/content/0000`` and named by ``network_config`` in
``meta_data.json``. IO-free.

Which interfaces, and what of them, is Nova's rule (nova/virt/netutils.py
``get_injected_network_template``): VIFs with a network and subnets are numbered ``eth0``,
``eth1``, ... in order; one is written only when its network is marked ``injected`` (Nova's
``[DEFAULT] flat_injected`` on the compute host that built its network model) and neither its
first IPv4 nor its first IPv6 subnet has a DHCP server; of each, the first IP, the subnet's
netmask (IPv6: its prefix length), gateway, broadcast and DNS servers. Nothing is written when
no interface qualifies.

The file is the one Nova's own template (``nova/virt/interfaces.template``, rendered by Jinja2
with ``trim_blocks``) gives for the metadata API (no libvirt virt type): written here by plain
code, line for line, and compared byte for byte with Nova 34's answers by
tests/compat/test_nova_dropin.py. A template of the operator's own (``[DEFAULT]
injected_network_template`` naming another file) is not rendered (config.py says so at start).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cloudseed.nova_metadata.network import (
    SUBNET_KEYS,
    first_subnet,
    meta_of,
    subnets_of,
    version_of,
)

NETWORK_KEYS = frozenset({"id", "bridge", "label", "subnets", "meta"})
CONTENT_KEY = "0000"  # the metadata API's only content: the template is its first and last
HEADER = (
    "# Injected by Nova on instance boot\n"
    "#\n"
    "# This file describes the network interfaces available on your system\n"
    "# and how to activate them. For more information, see interfaces(5).\n"
    "\n"
    "# The loopback network interface\n"
    "auto lo\n"
    "iface lo inet loopback\n"
)


@dataclass(frozen=True, slots=True)
class Interface:
    name: str
    hwaddress: str | None
    address: str | None
    netmask: str | None
    gateway: str | None
    broadcast: str | None
    dns: str | None
    address_v6: str | None = None
    netmask_v6: int | None = None
    gateway_v6: str | None = None
    dns_v6: str | None = None


def injected(vifs: Sequence[Mapping[str, Any]] | None) -> tuple[list[Interface], bool]:
    """The interfaces to write, and whether any has an IPv6 address (the template writes
    IPv6 stanzas only then)."""
    found: list[Interface] = []
    ipv6 = False
    number = -1
    for vif in vifs or ():
        network = vif.get("network")
        subnets = subnets_of(vif)
        if not network or not subnets:
            continue
        v4, v6 = first_subnet(subnets, 4), first_subnet(subnets, 6)
        number += 1
        if not meta_of(network, NETWORK_KEYS).get("injected"):
            continue
        if _has_dhcp_server(v4) or _has_dhcp_server(v6):
            continue
        four = _static(v4) if v4 is not None else {}
        six = _static(v6) if v6 is not None else {}
        if six.get("address"):
            ipv6 = True
        found.append(
            Interface(
                name=f"eth{number}",
                hwaddress=vif.get("address"),
                address=four.get("address"),
                netmask=four.get("netmask"),
                gateway=four.get("gateway"),
                broadcast=four.get("broadcast"),
                dns=four.get("dns"),
                address_v6=six.get("address"),
                netmask_v6=six.get("netmask"),
                gateway_v6=six.get("gateway"),
                dns_v6=six.get("dns"),
            )
        )
    return found, ipv6


def _has_dhcp_server(subnet: Mapping[str, Any] | None) -> bool:
    return subnet is not None and meta_of(subnet, SUBNET_KEYS).get("dhcp_server") is not None


def _static(subnet: Mapping[str, Any]) -> dict[str, Any]:
    """The first IP of ``subnet`` and what the file says with it; {} when it has none."""
    ips = subnet.get("ips") or []
    if not ips:
        return {}
    ip = ips[0]
    cidr = ipaddress.ip_network(subnet["cidr"], strict=False)
    gateway = subnet.get("gateway")
    four = version_of(ip, "address") == 4
    return {
        "address": ip.get("address"),
        # Nova's get_netmask: dotted for IPv4, the prefix length for IPv6.
        "netmask": str(cidr.netmask) if four else cidr.prefixlen,
        "gateway": gateway.get("address") if gateway else "",
        # netaddr's: none for a /31 or /32 (and printed as such).
        "broadcast": str(cidr.broadcast_address) if cidr.num_addresses > 2 else None,
        "dns": " ".join(str(dns.get("address")) for dns in subnet.get("dns") or []),
    }


def _text(value: object) -> str:
    """A value as the template prints it (Jinja2's ``str``: None is "None")."""
    return str(value)


def render(interfaces: Sequence[Interface], ipv6: bool) -> bytes:
    """The file, as Nova's template writes it for these interfaces."""
    lines = [HEADER]
    for ifc in interfaces:
        lines.append(f"\nauto {ifc.name}\n")
        if ifc.address:
            lines.append(
                f"iface {ifc.name} inet static\n"
                f"    hwaddress ether {_text(ifc.hwaddress)}\n"
                f"    address {_text(ifc.address)}\n"
                f"    netmask {_text(ifc.netmask)}\n"
                f"    broadcast {_text(ifc.broadcast)}\n"
            )
            if ifc.gateway:
                lines.append(f"    gateway {ifc.gateway}\n")
            if ifc.dns:
                lines.append(f"    dns-nameservers {ifc.dns}\n")
        if ipv6 and ifc.address_v6:
            lines.append(
                f"iface {ifc.name} inet6 static\n"
                f"    hwaddress ether {_text(ifc.hwaddress)}\n"
                f"    address {ifc.address_v6}\n"
                f"    netmask {_text(ifc.netmask_v6)}\n"
            )
            if ifc.gateway_v6:
                lines.append(f"    gateway {ifc.gateway_v6}\n")
            if ifc.dns_v6:
                lines.append(f"    dns-nameservers {ifc.dns_v6}\n")
    return "".join(lines).encode()


def network_template(vifs: Sequence[Mapping[str, Any]] | None) -> bytes | None:
    """The rendered file, or None when no interface is injected (Nova then has no
    ``network_config``)."""
    interfaces, ipv6 = injected(vifs)
    return render(interfaces, ipv6) if interfaces else None
