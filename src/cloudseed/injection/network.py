"""Render Debian's ``/etc/network/interfaces`` from an instance's ports. No IO.

Ports are the dicts of ``GuestSpec.ports``: ``mac_address``, ``mtu`` and ``fixed_ips`` (a list of
addresses), plus what ``Port.network_info`` holds (``cidr``, ``gateway``, ``dns_nameservers``),
either at the top level or under ``network_info``. Interfaces are named ``eth0``, ``eth1``… in
port order, as Nova's template does. An address whose subnet is unknown gets DHCP (IPv4) or
SLAAC (IPv6) rather than a made-up netmask.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence

# Values come from the database, but a stray newline would add lines to the file; only
# well-formed addresses are written.
MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")

HEADER = (
    "# Written by cloudseed image injection from the instance's ports.\n"
    "# Interfaces are named in port order.\n\n"
    "auto lo\niface lo inet loopback\n"
)


def _port_info(port: Mapping[str, object]) -> dict[str, object]:
    info: dict[str, object] = dict(port)
    nested = port.get("network_info")
    if isinstance(nested, str):
        nested = json.loads(nested)
    if isinstance(nested, Mapping):
        info.update(nested)
    return info


def _addresses(info: Mapping[str, object]) -> list[str]:
    fixed = info.get("fixed_ips") or []
    if not isinstance(fixed, Sequence) or isinstance(fixed, str):
        return []
    out = []
    for item in fixed:
        # Accept Nova-style {"address": ...} entries as well as bare strings.
        address = _ip_or_none(item.get("address") if isinstance(item, Mapping) else item)
        if address:
            out.append(address)
    return out


def _ip_or_none(value: object) -> str | None:
    try:
        return str(ipaddress.ip_address(value)) if isinstance(value, str) else None
    except ValueError:
        return None


def _stanza(name: str, address: str, info: Mapping[str, object]) -> list[str]:
    ip = ipaddress.ip_address(address)
    family = "inet" if ip.version == 4 else "inet6"
    cidr = info.get("cidr")
    network = ipaddress.ip_network(cidr, strict=False) if isinstance(cidr, str) else None
    if network is None or ip not in network:
        method = "dhcp" if ip.version == 4 else "auto"
        return [f"iface {name} {family} {method}", f"    # address {address} (subnet unknown)"]
    lines = [f"iface {name} {family} static", f"    address {address}/{network.prefixlen}"]
    gateway = _ip_or_none(info.get("gateway"))
    if gateway and ipaddress.ip_address(gateway).version == ip.version:
        lines.append(f"    gateway {gateway}")
    dns = info.get("dns_nameservers")
    servers = (
        [s for s in (_ip_or_none(d) for d in dns) if s]
        if isinstance(dns, Sequence) and not isinstance(dns, str)
        else []
    )
    if servers:
        lines.append(f"    dns-nameservers {' '.join(servers)}")
    return lines


def render_interfaces(ports: Sequence[Mapping[str, object]]) -> str | None:
    """The interfaces file for these ports, or None when there are none to configure."""
    if not ports:
        return None
    blocks = [HEADER]
    for index, port in enumerate(ports):
        info = _port_info(port)
        name = f"eth{index}"
        lines = [f"auto {name}"]
        addresses = _addresses(info)
        stanzas = [_stanza(name, a, info) for a in addresses] or [[f"iface {name} inet dhcp"]]
        for stanza in stanzas:
            lines.extend(stanza)
            mac = info.get("mac_address")
            if isinstance(mac, str) and MAC.match(mac):
                lines.append(f"    hwaddress ether {mac}")
            mtu = info.get("mtu")
            if isinstance(mtu, int) and not isinstance(mtu, bool) and mtu > 0:
                lines.append(f"    mtu {mtu}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
