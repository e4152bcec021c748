"""``network_data.json`` and the EC2 tree's addresses from an instance's cached network
information (``instance_info_caches.network_info``: Nova's network model as JSON, a list of
VIFs). IO-free.

The rules are Nova's (nova/virt/netutils.py ``get_network_metadata`` and ``get_ec2_ip_info``):

- a VIF without a network or subnets is skipped; of each VIF only the first IPv4 and the first
  IPv6 subnet count; a link is listed when the VIF has either, named by its ``devname``
  (else ``interface<N>``, counting the VIFs that have subnets), typed ``phy`` unless its VIF
  type is one of the legacy types guests have always seen;
- a link's MTU is the network's, but none when a subnet has a DHCP server;
- a subnet with IPs is a network: ``ipv6_<mode>`` when it has an IPv6 address mode; else
  ``ipv<N>_dhcp`` (only an id, the link and the network's id) when it has a DHCP server or
  DHCP enabled; else a static network with its first IP, netmask, the default route through
  its gateway, its own routes and its DNS servers;
- ``services`` lists every network's DNS servers once.

A model's extra keys are its ``meta`` (as Nova's model classes take them), and a subnet or IP
without a ``version`` gets it from its CIDR or address.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# nova/network/model.py LEGACY_EXPOSED_VIF_TYPES: shown as the link's type.
LEGACY_VIF_TYPES = frozenset(
    {"bridge", "dvs", "hw_veb", "hyperv", "ovs", "tap", "vhostuser", "vif"}
)
SUBNET_KEYS = frozenset({"cidr", "dns", "gateway", "ips", "routes", "version", "meta"})


class Unreadable(ValueError):
    """network_info is not Nova's network model."""


@dataclass(frozen=True, slots=True)
class Addresses:
    """What the EC2 tree shows: the fixed IPv4 addresses and the floating ones, in order."""

    fixed_ipv4: tuple[str, ...]
    floating: tuple[str, ...]


def parse(text: str | None) -> list[dict[str, Any]] | None:
    """The VIFs of ``network_info`` (None: no cache, or a NULL one)."""
    if text is None:
        return None
    try:
        vifs = json.loads(text)
    except ValueError:
        raise Unreadable("network_info is not JSON") from None
    if vifs is None:
        return None
    if not isinstance(vifs, list) or not all(isinstance(v, dict) for v in vifs):
        raise Unreadable("network_info is not a list of VIFs")
    return vifs


def meta_of(model: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    meta = dict(model.get("meta") or {})
    meta.update({k: v for k, v in model.items() if k not in known})
    return meta


def version_of(item: Mapping[str, Any], key: str) -> int | None:
    version = item.get("version")
    if version:
        return int(version)
    value = item.get(key)
    if not value:
        return None
    try:
        if key == "cidr":
            return ipaddress.ip_network(value, strict=False).version
        return ipaddress.ip_address(value).version
    except ValueError:
        raise Unreadable(f"{value!r} is not an address") from None


def subnets_of(vif: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    network = vif.get("network") or {}
    return list(network.get("subnets") or [])


def first_subnet(subnets: Sequence[Mapping[str, Any]], version: int) -> Mapping[str, Any] | None:
    for subnet in subnets:
        if version_of(subnet, "cidr") == version:
            return subnet
    return None


def network_data(vifs: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The ``network_data.json`` document (None: Nova's ``{}``, no network information)."""
    if not vifs:
        return None
    links: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    services: list[dict[str, Any]] = []
    interface = -1
    for vif in vifs:
        subnets = subnets_of(vif)
        if not vif.get("network") or not subnets:
            continue
        v4, v6 = first_subnet(subnets, 4), first_subnet(subnets, 6)
        interface += 1
        if v4 is None and v6 is None:
            continue
        link = _link(vif, subnets, interface)
        links.append(link)
        for version, subnet in ((4, v4), (6, v6)):
            if subnet is not None and subnet.get("ips"):
                networks.append(_network(vif, subnet, version, len(networks), link["id"]))
                services += [dns for dns in _dns(subnet) if dns not in services]
    return {"links": links, "networks": networks, "services": services}


def _link(
    vif: Mapping[str, Any], subnets: list[Mapping[str, Any]], interface: int
) -> dict[str, Any]:
    network = vif["network"]
    mtu = meta_of(network, frozenset({"id", "bridge", "label", "subnets", "meta"})).get("mtu")
    if any(meta_of(s, SUBNET_KEYS).get("dhcp_server") for s in subnets):
        mtu = None
    kind = vif.get("type")
    return {
        "id": vif.get("devname") or f"interface{interface}",
        "vif_id": vif.get("id"),
        "type": kind if kind in LEGACY_VIF_TYPES else "phy",
        "mtu": mtu,
        "ethernet_mac_address": vif.get("address"),
    }


def _network(
    vif: Mapping[str, Any], subnet: Mapping[str, Any], version: int, number: int, link: str
) -> dict[str, Any]:
    meta = meta_of(subnet, SUBNET_KEYS)
    network_id = vif["network"].get("id")
    suffix = ""
    if meta.get("ipv6_address_mode") is not None:
        suffix = f"_{meta['ipv6_address_mode']}"
    elif meta.get("dhcp_server") is not None or meta.get("enable_dhcp"):
        return {
            "id": f"network{number}",
            "type": f"ipv{version}_dhcp",
            "link": link,
            "network_id": network_id,
        }
    cidr = ipaddress.ip_network(subnet["cidr"], strict=False)
    routes = []
    gateway = subnet.get("gateway") or {}
    if gateway.get("address"):
        default = "0.0.0.0" if version == 4 else "::"
        routes.append({"network": default, "netmask": default, "gateway": gateway["address"]})
    for route in subnet.get("routes") or []:
        destination = ipaddress.ip_network(route["cidr"], strict=False)
        routes.append(
            {
                "network": str(destination.network_address),
                "netmask": str(destination.netmask),
                "gateway": (route.get("gateway") or {}).get("address"),
            }
        )
    return {
        "id": f"network{number}",
        "type": f"ipv{version}{suffix}",
        "link": link,
        "ip_address": subnet["ips"][0]["address"],
        "netmask": str(cidr.netmask),
        "routes": routes,
        "network_id": network_id,
        "services": _dns(subnet),
    }


def _dns(subnet: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "dns", "address": ip.get("address")} for ip in subnet.get("dns") or []]


def addresses(vifs: list[dict[str, Any]] | None) -> Addresses:
    """The fixed IPv4 and the floating addresses, VIF by VIF, subnet by subnet."""
    fixed: list[str] = []
    floating: list[str] = []
    for vif in vifs or ():
        if not vif.get("network"):
            continue
        for subnet in subnets_of(vif):
            for ip in subnet.get("ips") or []:
                if version_of(ip, "address") == 4:
                    fixed.append(ip["address"])
                floating += [f["address"] for f in ip.get("floating_ips") or [] if f]
    return Addresses(fixed_ipv4=tuple(fixed), floating=tuple(floating))


def all_fixed(vifs: list[dict[str, Any]] | None) -> tuple[str, ...]:
    """Every fixed address (both families): what a guest may call from in direct mode."""
    found: list[str] = []
    for vif in vifs or ():
        if vif.get("network"):
            for subnet in subnets_of(vif):
                found += [ip["address"] for ip in subnet.get("ips") or [] if ip.get("address")]
    return tuple(found)
