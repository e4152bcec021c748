"""The EC2 tree of the metadata service (``/<version>/meta-data/...``) and the config drive's
``ec2/<version>/meta-data.json``, rendered from GuestFacts alone. IO-free.

``ec2_meta_data`` builds the tree as nested dicts; the service walks it (``ec2_listing`` for a
directory, ``ec2_leaf`` for a value) and answers ``public-keys`` from the facts
(``ec2_public_keys``). The OpenStack tree is ``render.py``'s.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts
from cloudseed.metadata.instance_tags import instance_tags
from cloudseed.metadata.render import dumps, hostname_with_domain, key_names

EC2_INDEX = "\n".join((*v.EC2_VERSIONS, "latest")).encode()


def first_ipv4(facts: GuestFacts) -> str | None:
    for port in facts.ports:
        for address in port.addresses:
            # Stored addresses are valid and normalised: IPv6 ones are those with a colon
            # (parsing each with ipaddress cost more than the rest of an EC2 request).
            if ":" not in address:
                return address
    return None


def ec2_meta_data(
    facts: GuestFacts, version: str, *, dhcp_domain: str, local_ipv4: str | None
) -> dict[str, Any]:
    """The EC2 ``meta-data`` tree as nested dicts (leaves are str, int or list of str)."""
    hostname = hostname_with_domain(facts, dhcp_domain)
    data: dict[str, Any] = {
        "ami-id": f"ami-{int(facts.image_ref.replace('-', '')[:8] or '0', 16):08x}",
        "ami-launch-index": facts.launch_index,
        "ami-manifest-path": "FIXME",
        "instance-id": f"i-{facts.ec2_number:08x}",
        "hostname": hostname,
        # The address asked from stands in only when it is IPv4: an IPv6-only guest has none.
        "local-ipv4": first_ipv4(facts)
        or (local_ipv4 if local_ipv4 and ":" not in local_ipv4 else None),
        "reservation-id": facts.reservation_id,
        "security-groups": list(facts.security_groups),
    }
    if facts.keys:
        data["public-keys"] = {
            str(i): {"openssh-key": k.public_key} for i, k in enumerate(facts.keys)
        }
    if v.at_least(version, "2007-01-19"):
        data["local-hostname"] = hostname
        data["public-hostname"] = hostname
        data["public-ipv4"] = ""
    if v.at_least(version, "2007-08-29"):
        data["instance-type"] = facts.flavor_name
    if v.at_least(version, "2007-12-15"):
        data["block-device-mapping"] = {"ami": "vda", "root": "/dev/vda"}
    if v.at_least(version, "2008-02-01"):
        data["placement"] = {"availability-zone": facts.availability_zone}
    if v.at_least(version, "2008-09-01"):
        data["instance-action"] = "none"
    if v.at_least(version, v.EC2_NETWORK) and any(":" in a for a in facts.addresses):
        data["mac"] = facts.ports[0].mac
        data["network"] = {"interfaces": {"macs": ec2_interfaces(facts, hostname)}}
    if facts.tags_enabled:  # 2.109's instance_metadata_tags, at every version, as EC2's
        data["tags"] = {"instance": instance_tags(facts)}
    return data


def ec2_interfaces(facts: GuestFacts, hostname: str) -> dict[str, Any]:
    """``network/interfaces/macs/``: one directory per port, named by its MAC, with EC2's
    keys for what cloudseed knows of it: its position, id, addresses (``local-ipv4s``,
    ``ipv6s``), network (``subnet-id``) and subnet blocks, security groups. Served only to a
    guest with an IPv6 address (docs/metadata.md): IPv4 guests see Nova's tree unchanged."""
    found: dict[str, Any] = {}
    for index, port in enumerate(facts.ports):
        ipv4 = [a for a in port.addresses if ":" not in a]
        ipv6 = [a for a in port.addresses if ":" in a]
        subnet = ipaddress.ip_network(port.cidr, strict=False)
        interface: dict[str, Any] = {
            "device-number": str(index),
            "interface-id": port.port_id,
            "local-hostname": hostname,
            "mac": port.mac,
            "security-groups": list(facts.security_groups),
            "subnet-id": port.network_id,
        }
        if ipv4:
            interface["local-ipv4s"] = ipv4
            if subnet.version == 4:
                interface["subnet-ipv4-cidr-block"] = str(subnet)
        if ipv6:
            interface["ipv6s"] = ipv6
            if subnet.version == 6:
                interface["subnet-ipv6-cidr-blocks"] = [str(subnet)]
        found[port.mac] = interface
    return found


def ec2_listing(node: dict[str, Any]) -> bytes:
    """A directory of the EC2 tree: sorted names, sub-directories with a trailing ``/``."""
    return "\n".join(f"{k}/" if isinstance(node[k], dict) else k for k in sorted(node)).encode()


def ec2_public_keys(facts: GuestFacts, rest: tuple[str, ...]) -> bytes | None:
    """``meta-data/public-keys/<rest>``, None where nothing is. EC2's layout: the directory
    lists ``N=<key name>`` for each key (cloud-init then reads ``N/openssh-key``), and
    ``N/`` holds the one leaf ``openssh-key``."""
    if not rest:
        names = key_names(facts)
        return "\n".join(f"{i}={name}" for i, name in enumerate(names)).encode()
    index = _key_index(rest[0], len(facts.keys))
    if index is None or len(rest) > 2 or rest[1:] not in ((), ("openssh-key",)):
        return None
    if len(rest) == 1:
        return b"openssh-key"
    return facts.keys[index].public_key.encode()


def _key_index(segment: str, count: int) -> int | None:
    """``segment`` as the index of one of ``count`` keys, written as EC2 writes it (decimal,
    no sign, no leading zero), else None."""
    if not segment.isascii() or not segment.isdigit() or (segment[0] == "0" and segment != "0"):
        return None
    index = int(segment) if len(segment) < 6 else count
    return index if index < count else None


def ec2_leaf(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, list):
        return "\n".join(str(x) for x in value).encode()
    return str(value).encode()


def ec2_meta_data_json(facts: GuestFacts, version: str, *, dhcp_domain: str) -> bytes:
    """``ec2/<version>/meta-data.json`` on a config drive: the tree as JSON, without Nova's
    leftover ``_name`` key."""
    return dumps(ec2_meta_data(facts, version, dhcp_domain=dhcp_domain, local_ipv4=None))
