"""What a bridged network is made of, as plain values: the names cloudseed gives it on the
host, the addresses its namespace holds, the bridge's filter rules, dnsmasq's command line and
static leases, and the port map its metadata proxy reads. No IO: bridge_networks.py makes
these real.

A bridged network (``cloudseed network add --mode bridge``) is, on each compute host that has a
guest on it, one network namespace ``cloudseed-<host tag>-<network uuid>`` (the host tag tells
apart the agents of several hosts, or state directories, on one machine). Inside it, and
nowhere else:

- the bridge ``csbr0`` holding the network's gateway address, ``169.254.169.254/32``,
  ``fe80::a9fe:a9fe/64`` and, when the network enables it, ``fd00:ec2::254/128``;
- one tap per guest port, ``cst<12 hex digits of the port uuid>``, with the port's MAC on the
  guest's side;
- a ``bridge cloudseed`` nftables table that lets each tap send only as its port: the port's
  source MAC, its fixed IPs (plus DHCP's 0.0.0.0 discovery), IPv6's link-local address made
  from the MAC (EUI-64, as OVN's and Neutron's port security allow), ARP and neighbour
  advertisements only for those addresses; and never a DHCP or DHCPv6 server's answer, a
  router advertisement or a redirect. Every other frame of a tap is dropped, and so is every
  frame of a device that is not a known port.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

NAMESPACE_PREFIX = "cloudseed-"
BRIDGE = "csbr0"
TAP_PREFIX = "cst"
UPLINK = "csup0"  # the namespace's user-mode uplink (egress)
METADATA_V4 = "169.254.169.254"
METADATA_V6 = "fe80::a9fe:a9fe"
METADATA_EC2 = "fd00:ec2::254"
METADATA_PORT = 80
# The uplink's network as slirp4netns configures it (its default): the namespace is .100.
UPLINK_NET = "10.0.2.0/24"
DHCP_LEASE = "1h"


@dataclass(frozen=True)
class BridgedNetwork:
    """One bridged network as its ports' records keep it (immutable: a network is never
    edited, only added and deleted)."""

    network_id: str
    cidr: str
    gateway: str | None
    mtu: int
    dns: tuple[str, ...] = ()
    egress: bool = False
    ec2_metadata_address: bool = False

    @classmethod
    def of_port(cls, port: Mapping[str, object]) -> BridgedNetwork:
        """From a ``GuestSpec`` port (``agent/guests.py``: its ``network`` entry)."""
        info = port.get("network")
        info = info if isinstance(info, Mapping) else {}
        dns = info.get("dns_nameservers")
        mtu = port.get("mtu")
        gateway = info.get("gateway")
        return cls(
            network_id=str(port["network_id"]),
            cidr=str(info.get("cidr")),
            gateway=str(gateway) if gateway else None,
            mtu=mtu if isinstance(mtu, int) and mtu > 0 else 1500,
            dns=tuple(str(d) for d in dns) if isinstance(dns, list) else (),
            egress=bool(info.get("egress")),
            ec2_metadata_address=bool(info.get("ec2_metadata_address")),
        )

    @property
    def version(self) -> int:
        return ipaddress.ip_network(self.cidr).version

    def bridge_addresses(self) -> list[str]:
        """The addresses (with prefix) the namespace's bridge holds."""
        net = ipaddress.ip_network(self.cidr)
        # The gateway first: the bridge's primary address, what dnsmasq answers from.
        found = [f"{self.gateway}/{net.prefixlen}"] if self.gateway else []
        found += [f"{METADATA_V4}/32", f"{METADATA_V6}/64"]
        if self.ec2_metadata_address:
            found.append(f"{METADATA_EC2}/128")
        return found

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> BridgedNetwork:
        """What ``as_json`` wrote (``network.json``)."""
        gateway, mtu, dns = value.get("gateway"), value.get("mtu"), value.get("dns")
        return cls(
            network_id=str(value["network_id"]),
            cidr=str(value["cidr"]),
            gateway=str(gateway) if gateway else None,
            mtu=mtu if isinstance(mtu, int) else 1500,
            dns=tuple(str(d) for d in dns) if isinstance(dns, list) else (),
            egress=bool(value.get("egress")),
            ec2_metadata_address=bool(value.get("ec2_metadata_address")),
        )

    def as_json(self) -> dict[str, object]:
        return {
            "network_id": self.network_id,
            "cidr": self.cidr,
            "gateway": self.gateway,
            "mtu": self.mtu,
            "dns": list(self.dns),
            "egress": self.egress,
            "ec2_metadata_address": self.ec2_metadata_address,
        }


@dataclass(frozen=True)
class BridgedPort:
    """One guest port on a bridged network: what the bridge lets it send as, and whom the
    metadata proxy takes it for."""

    port_id: str
    mac: str
    addresses: tuple[str, ...]
    instance_id: str
    tenant_id: str

    @classmethod
    def of_port(
        cls, port: Mapping[str, object], *, instance_id: str, tenant_id: str
    ) -> BridgedPort:
        fixed = port.get("fixed_ips")
        return cls(
            port_id=str(port["port_id"]),
            mac=str(port["mac_address"]).lower(),
            addresses=tuple(str(ipaddress.ip_address(str(a))) for a in fixed if isinstance(a, str))
            if isinstance(fixed, list)
            else (),
            instance_id=instance_id,
            tenant_id=tenant_id,
        )

    @property
    def device(self) -> str:
        """The port's device in the namespace (15 characters, the kernel's limit)."""
        return TAP_PREFIX + self.port_id.replace("-", "")[:12]

    @property
    def link_local(self) -> str:
        return link_local(self.mac)

    def ipv4(self) -> list[str]:
        return [a for a in self.addresses if ":" not in a]

    def ipv6(self) -> list[str]:
        return [a for a in self.addresses if ":" in a]

    def as_json(self) -> dict[str, object]:
        return {
            "port_id": self.port_id,
            "mac": self.mac,
            "addresses": list(self.addresses),
            "instance_id": self.instance_id,
            "tenant_id": self.tenant_id,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> BridgedPort:
        addresses = value.get("addresses")
        return cls(
            port_id=str(value["port_id"]),
            mac=str(value["mac"]),
            addresses=tuple(str(a) for a in addresses) if isinstance(addresses, list) else (),
            instance_id=str(value["instance_id"]),
            tenant_id=str(value["tenant_id"]),
        )


def host_tag(state_dir: Path, host: str) -> str:
    """Eight hex digits that tell apart the namespaces of the agents sharing one machine: the
    agents of one host and state directory share theirs, any other pair does not."""
    return hashlib.sha256(f"{state_dir}\0{host}".encode()).hexdigest()[:8]


def namespace_name(tag: str, network_id: str) -> str:
    return f"{NAMESPACE_PREFIX}{tag}-{network_id}"


def network_of_namespace(tag: str, name: str) -> str | None:
    """The network id of one of this tag's namespaces, else None."""
    prefix = f"{NAMESPACE_PREFIX}{tag}-"
    return name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else None


def link_local(mac: str) -> str:
    """The IPv6 link-local address a guest makes from its MAC (modified EUI-64, RFC 4291)."""
    octets = [int(part, 16) for part in mac.split(":")]
    octets[0] ^= 0x02
    interface = [*octets[:3], 0xFF, 0xFE, *octets[3:]]
    value = (0xFE80 << 112) | int.from_bytes(bytes(interface), "big")
    return str(ipaddress.IPv6Address(value))


def ruleset(ports: Sequence[BridgedPort], *, egress: bool = False) -> str:
    """The namespace's whole nftables ruleset (loaded at once with ``nft -f``, replacing the
    previous one): the bridge's port security, and the uplink's masquerade with ``egress``."""
    lines = [
        "flush ruleset",
        "table bridge cloudseed {",
        "  chain prerouting {",
        "    type filter hook prerouting priority 0; policy drop;",
    ]
    for port in ports:
        lines.append(f'    iifname "{port.device}" jump {_chain(port)}')
    lines.append("  }")
    for port in ports:
        lines += [f"  chain {_chain(port)} {{", *(f"    {r}" for r in _port_rules(port)), "  }"]
    lines.append("}")
    if egress:
        lines += _egress_rules()
    return "\n".join(lines) + "\n"


def _chain(port: BridgedPort) -> str:
    return "port-" + port.port_id.replace("-", "")[:12]


def _port_rules(port: BridgedPort) -> list[str]:
    mac = port.mac
    ipv4 = port.ipv4()
    ipv6 = [port.link_local, *port.ipv6()]
    rules = [f"ether saddr != {mac} drop"]
    if ipv4:
        senders = _set([*ipv4, "0.0.0.0"])
        rules += [
            f"ether type arp arp saddr ether {mac} arp saddr ip {senders} accept",
            # A DHCP server's answer (rogue server in a guest); then DHCP discovery, then the
            # port's own addresses.
            "ether type ip udp sport 67 drop",
            "ether type ip ip saddr 0.0.0.0 udp sport 68 udp dport 67 accept",
            f"ether type ip ip saddr {_set(ipv4)} accept",
        ]
    rules += [
        "ether type ip6 icmpv6 type { nd-router-advert, nd-redirect } drop",
        "ether type ip6 udp sport 547 drop",
        # A neighbour advertisement names only the port's own addresses (its target, after
        # the ICMPv6 header's 8 bytes; nft 1.0.6 has no name for it).
        "ether type ip6 icmpv6 type nd-neighbor-advert "
        f"@th,64,128 != {_set([_hex128(a) for a in ipv6])} drop",
        f"ether type ip6 ip6 saddr {_set(ipv6)} accept",
        # Duplicate address detection and multicast listener reports come from ::.
        "ether type ip6 ip6 saddr :: icmpv6 type "
        "{ nd-neighbor-solicit, mld-listener-report, mld2-listener-report } accept",
        "drop",
    ]
    return rules


def _egress_rules() -> list[str]:
    """Routed traffic leaves only through the uplink, masqueraded; nothing is routed from the
    uplink in but answers."""
    return [
        "table inet cloudseed-egress {",
        "  chain forward {",
        "    type filter hook forward priority 0; policy drop;",
        f'    iifname "{BRIDGE}" oifname "{UPLINK}" accept',
        f'    iifname "{UPLINK}" oifname "{BRIDGE}" ct state established,related accept',
        "  }",
        "  chain postrouting {",
        "    type nat hook postrouting priority 100; policy accept;",
        f'    oifname "{UPLINK}" masquerade',
        "  }",
        "}",
    ]


def _set(values: Sequence[str]) -> str:
    return "{ " + ", ".join(values) + " }"


def _hex128(address: str) -> str:
    return "0x" + ipaddress.IPv6Address(address).packed.hex()


def dhcp_hosts(ports: Sequence[BridgedPort]) -> list[str]:
    """dnsmasq's static leases: each port's MAC and IPv4 address."""
    return [f"--dhcp-host={p.mac},{a}" for p in ports for a in p.ipv4()[:1]]


def dnsmasq_argv(
    binary: str, network: BridgedNetwork, directory: Path, ports: Sequence[BridgedPort]
) -> list[str]:
    """dnsmasq as the network's DHCPv4 server: static leases only (a MAC it does not know gets
    nothing), no DNS, bound to the bridge; the gateway, DNS servers, MTU and a route to the
    metadata address are handed out as options. The leases are on its command line, not in a
    file: dnsmasq reads files after dropping to ``nobody``, who may not reach the state
    directory; it is started again when they change (clients retry what a restart loses)."""
    net = ipaddress.ip_network(network.cidr)
    gateway = network.gateway
    argv = [
        binary,
        "--keep-in-foreground",
        "--conf-file=/dev/null",
        "--port=0",
        f"--interface={BRIDGE}",
        "--bind-interfaces",
        "--except-interface=lo",
        f"--dhcp-range={net.network_address},static,{net.netmask},{DHCP_LEASE}",
        "--leasefile-ro",
        "--dhcp-authoritative",
        f"--pid-file={directory / 'dnsmasq.pid'}",
        "--log-facility=-",
        f"--dhcp-option=option:mtu,{network.mtu}",
    ]
    if gateway:
        argv += [
            f"--dhcp-option=option:router,{gateway}",
            # With classless routes a client ignores the router option: both routes here.
            f"--dhcp-option=option:classless-static-route,{METADATA_V4}/32,{gateway},"
            f"0.0.0.0/0,{gateway}",
        ]
    dns = [d for d in network.dns if ":" not in d]
    if dns:
        argv.append("--dhcp-option=option:dns-server," + ",".join(dns))
    return argv + dhcp_hosts(ports)


def bridged_ports(ports: Sequence[Mapping[str, object]]) -> list[tuple[int, Mapping[str, object]]]:
    """A guest's ports on bridged networks (``GuestSpec.ports``), each with its index among
    the guest's NICs."""
    found = []
    for index, port in enumerate(ports):
        network = port.get("network")
        if isinstance(network, Mapping) and network.get("mode") == "bridge":
            found.append((index, port))
    return found


def proxy_ports(ports: Sequence[BridgedPort], headers: Mapping[str, list[list[str]]]) -> bytes:
    """The metadata proxy's port map (``ports.json``, mode 0600): for each source address a
    port may use (its fixed IPs and its link-local address), the signed identity headers
    (``headers``: port id -> [name, value] pairs) the proxy adds to that caller's requests."""
    sources: dict[str, object] = {}
    for port in ports:
        entry = {"port_id": port.port_id, "headers": headers[port.port_id]}
        for address in (*port.addresses, port.link_local):
            sources[address] = entry
    return json.dumps({"sources": sources}, sort_keys=True).encode()
