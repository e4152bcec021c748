"""The guest's documents, rendered from GuestFacts alone. IO-free.

The metadata service and the config drive builder both call these functions, so the two
cannot disagree; the EC2 tree is ``render_ec2.py``'s. ``meta_data.json`` carries a fresh
``random_seed`` every time it is served (as in Nova); it is rendered once around a marker and
the seed is spliced in per response.
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cloudseed.metadata import devices
from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts
from cloudseed.metadata.instance_tags import instance_tags
from cloudseed.replay import Hole


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).encode()


# Where the seed goes: unguessable, so no user-supplied value can contain it.
_SEED_MARKER = "seed-" + secrets.token_hex(16)
_SEED_MARKER_JSON = json.dumps(_SEED_MARKER).encode()


@dataclass(frozen=True, slots=True)
class SeededJSON:
    """A JSON document with a hole for a random seed: ``head``, ``alike`` and ``tail``, the
    seed, ``suffix`` (None when there is no seed: then the first three are the whole
    document; else the seed's quotes end the tail and start the suffix). ``alike`` is what
    guests often have in common (``meta_data``: metadata items and keys), cut out so that a
    worker's cache can hold one copy of it (documents.py); empty when nothing was cut out."""

    head: bytes
    alike: bytes
    tail: bytes
    suffix: bytes | None

    @property
    def prefix(self) -> bytes:
        return b"".join((self.head, self.alike, self.tail))

    def render(self, seed: bytes | None = None) -> bytes:
        if self.suffix is None:
            return self.prefix
        if seed is None:
            seed = new_seed()
        return b"".join((self.head, self.alike, self.tail, seed, self.suffix))

    def seed_hole(self) -> Hole | None:
        """Where the seed sits in ``render()``'s bytes, for a replay to make it afresh
        (replay.py); None without a seed."""
        return None if self.suffix is None else Hole(len(self.suffix), new_seed)


class _SeedPool:
    """Nova's seed, 512 bytes from the kernel's CSPRNG in base64, without a system call for
    each: the bytes of 64 seeds are read at once and each slice is handed out once. A forked
    worker starts with an empty pool, so no two processes serve the same bytes."""

    SIZE = 512
    BATCH = 64

    def __init__(self) -> None:
        self._pool = memoryview(b"")

    def empty(self) -> None:
        self._pool = memoryview(b"")

    def take(self) -> bytes:
        pool = self._pool
        if len(pool) < self.SIZE:
            pool = memoryview(os.urandom(self.SIZE * self.BATCH))
        self._pool = pool[self.SIZE :]
        return binascii.b2a_base64(pool[: self.SIZE], newline=False)


_seeds = _SeedPool()
os.register_at_fork(after_in_child=_seeds.empty)


def new_seed() -> bytes:
    return _seeds.take()


def hostname_with_domain(facts: GuestFacts, dhcp_domain: str) -> str:
    return f"{facts.hostname}.{dhcp_domain}" if dhcp_domain else facts.hostname


def meta_data(
    facts: GuestFacts,
    version: str,
    *,
    dhcp_domain: str,
    extra: Mapping[str, Any] | None = None,
    files: list[dict[str, str]] | None = None,
) -> SeededJSON:
    """``meta_data.json`` for one OpenStack version, fields in Nova's order.

    ``extra`` (``admin_pass``) and ``files`` exist only on config drives.
    """
    doc: dict[str, Any] = {"uuid": facts.uuid}
    if facts.meta:
        doc["meta"] = dict(facts.meta)
    if files:
        doc["files"] = files
    for key, value in (extra or {}).items():
        doc.setdefault(key, value)
    if facts.keys:
        names = key_names(facts)
        doc["public_keys"] = {n: k.public_key for n, k in zip(names, facts.keys, strict=True)}
        doc["keys"] = [
            {"name": n, "type": k.type, "data": k.public_key}
            for n, k in zip(names, facts.keys, strict=True)
        ]
    doc["hostname"] = hostname_with_domain(facts, dhcp_domain)
    doc["name"] = facts.name
    doc["launch_index"] = facts.launch_index
    doc["availability_zone"] = facts.availability_zone
    if v.at_least(version, v.GRIZZLY):
        doc["random_seed"] = _SEED_MARKER
    if v.at_least(version, v.LIBERTY):
        doc["project_id"] = facts.project_id
    if v.at_least(version, v.NEWTON_ONE):
        doc["devices"] = devices.devices(facts, version)
    if v.at_least(version, v.VICTORIA):
        doc["dedicated_cpus"] = []
    if facts.tags_enabled:  # 2.109's instance_metadata_tags, at every version (cloudseed's)
        doc["tags"] = instance_tags(facts)
    body = dumps(doc)
    prefix, marker, suffix = body.partition(_SEED_MARKER_JSON)
    if not marker:
        return SeededJSON(*_cut_alike(prefix, doc), suffix=None)
    # The seed's quotes go with what is around it: one piece less to join in every answer.
    return SeededJSON(*_cut_alike(prefix + b'"', doc), suffix=b'"' + suffix)


# The members of meta_data.json that the guests of one boot storm usually have in common (one
# key pair, the same metadata items): the key alone, twice, is some 200 bytes (ed25519) to
# 1.5 KB (RSA 4096) in each guest's copy.
_ALIKE = ("meta", "public_keys", "keys")


def _cut_alike(prefix: bytes, doc: Mapping[str, Any]) -> tuple[bytes, bytes, bytes]:
    """``prefix`` as (before, the _ALIKE members, after) where they stand together (right
    after the uuid; not on a config drive, whose files come between), else (prefix, b"",
    b"")."""
    alike = {name: doc[name] for name in _ALIKE if name in doc}
    if not alike:
        return prefix, b"", b""
    # The members exactly as they stand inside the document: dumps writes each the same way
    # wherever it is. A JSON string cannot hold them unescaped, so the first match is theirs.
    members = dumps(alike)[1:-1]
    before, found, after = prefix.partition(members)
    return (before, members, after) if found else (prefix, b"", b"")


def key_names(facts: GuestFacts) -> list[str]:
    """The name the guest sees for each served key, in order. Key pair names are unique per
    user, but a project's key may be named like one of the server's own (another user's);
    cloud-init keys both trees by name, so a repeated name gets ``-2``, ``-3``... rather than
    hide a key."""
    names: list[str] = []
    taken: set[str] = set()
    for key in facts.keys:
        name, n = key.name, 2
        while name in taken:
            name, n = f"{key.name}-{n}", n + 1
        taken.add(name)
        names.append(name)
    return names


def authorized_keys(facts: GuestFacts) -> bytes:
    """``authorized_keys`` for sshd's AuthorizedKeysCommand: each served SSH key on a line of
    its own (an x509 key is a certificate, not a login key). A key is written as one line
    whatever its comment holds, so no key can add a line of its own choosing."""
    lines = [
        k.public_key.strip().splitlines()[0] + "\n"
        for k in facts.keys
        if k.type == "ssh" and k.public_key.strip()
    ]
    return "".join(lines).encode()


def meta_data_variant(version: str, facts: GuestFacts | None = None) -> str:
    """Versions whose meta_data.json is the same (for ``facts``' guest) share one rendering:
    the version that introduced the last field present."""
    variant = v.FOLSOM
    for step in (v.GRIZZLY, v.LIBERTY, v.NEWTON_ONE, *devices.variant_steps(facts), v.VICTORIA):
        if v.at_least(version, step):
            variant = step
    return variant


def network_data(facts: GuestFacts) -> bytes:
    """``network_data.json``: links with the ports' real MACs, one network per port (the first
    IPv4 and first IPv6 address, as Nova), DNS services de-duplicated.

    Rendered at each request that is not a replay (the worker keeps no copy: 570 bytes a
    cached guest, most asked for once a boot), so kept cheap: a subnet is parsed once for
    every guest on it (``_subnet``), and an address's family is told by its colon."""
    if not facts.ports:
        return b"{}"
    links: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    services: list[dict[str, str]] = []
    for port in facts.ports:
        link_id = "tap" + port.port_id[:11]
        links.append(
            {
                "id": link_id,
                "vif_id": port.port_id,
                "type": "phy",
                "mtu": port.mtu,
                "ethernet_mac_address": port.mac,
            }
        )
        version, netmask = _subnet(port.cidr)
        for address in _first_of_each_family(port.addresses):
            if _family(address) != version:
                continue
            default = "0.0.0.0" if version == 4 else "::"
            routes = (
                [{"network": default, "netmask": default, "gateway": port.gateway}]
                if port.gateway
                else []
            )
            networks.append(
                {
                    "id": f"network{len(networks)}",
                    "type": f"ipv{version}",
                    "link": link_id,
                    "ip_address": address,
                    "netmask": netmask,
                    "routes": routes,
                    "network_id": port.network_id,
                    "services": [{"type": "dns", "address": d} for d in port.dns],
                }
            )
        for server in port.dns:
            entry = {"type": "dns", "address": server}
            if entry not in services:
                services.append(entry)
    return dumps({"links": links, "networks": networks, "services": services})


@functools.lru_cache(maxsize=1024)
def _subnet(cidr: str) -> tuple[int, str]:
    """A port's subnet: its IP version and netmask (ipaddress takes microseconds a parse)."""
    net = ipaddress.ip_network(cidr, strict=False)
    return net.version, str(net.netmask)


def _family(address: str) -> int:
    """A valid IP address's version: only IPv6 addresses have colons."""
    return 6 if ":" in address else 4


def _first_of_each_family(addresses: tuple[str, ...]) -> list[str]:
    seen: dict[int, str] = {}
    for address in addresses:
        seen.setdefault(_family(address), address)
    return list(seen.values())


def openstack_listing(facts: GuestFacts, version: str, *, vendor_data_json: bool) -> bytes:
    """``/openstack/<version>``: the files that version serves for this guest (only those that
    exist: Nova also lists vendor_data.json when it would 404)."""
    names = ["meta_data.json"]
    if facts.user_data:
        names.append("user_data")
    if v.at_least(version, v.GRIZZLY):
        names.append("password")
    if v.at_least(version, v.HAVANA) and vendor_data_json:
        names.append("vendor_data.json")
    if v.at_least(version, v.LIBERTY):
        names.append("network_data.json")
    if v.at_least(version, v.NEWTON_TWO):
        names.append("vendor_data2.json")
    return "\n".join(names).encode()


OPENSTACK_INDEX = "\n".join((*v.OPENSTACK_VERSIONS, "latest")).encode()


def user_data(facts: GuestFacts) -> bytes | None:
    if not facts.user_data:
        return None
    return base64.b64decode(facts.user_data)
