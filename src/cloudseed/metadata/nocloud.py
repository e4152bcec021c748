"""The four files of a NoCloud seed, rendered from GuestFacts alone (IO-free): what the
metadata listener serves under a seed URL and what a ``CIDATA`` drive holds.

- ``meta-data``: ``instance-id``, ``local-hostname`` (as meta_data.json's hostname),
  ``public-keys`` (name -> key, as meta_data.json's ``public_keys``) and, when the server has
  one, ``availability-zone``.
- ``user-data``: the user data as given (gzip too); empty when there is none, because
  cloud-init 22.4's NoCloudNet fails the whole seed on a 404 there.
- ``vendor-data``: what cloud-init would take from vendor_data.json and vendor_data2.json
  (each one's ``cloud-init`` value), one part as it is, several as a MIME multipart.
- ``network-config``: network config version 2 from the same port facts as
  network_data.json: one ethernet per port, matched by MAC without ``set-name`` (cloud-init
  keeps the guest's own interface names), static addresses, default route, DNS. None without
  ports: cloud-init then falls back to DHCP on the first NIC.

Documents are JSON, which YAML 1.1 parsers (cloud-init's PyYAML) read as YAML, with every
character PyYAML refuses in a stream written as an escape.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import re
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any

from cloudseed.metadata.facts import GuestFacts
from cloudseed.metadata.render import hostname_with_domain, key_names

META_DATA = "meta-data"
USER_DATA = "user-data"
VENDOR_DATA = "vendor-data"
NETWORK_CONFIG = "network-config"
FILES = (META_DATA, USER_DATA, VENDOR_DATA, NETWORK_CONFIG)

# What PyYAML's reader refuses (it takes tab, LF, CR, printable ASCII, NEL, and the BMP and
# astral planes but for surrogates and U+FFFE/U+FFFF); json.dumps already escapes C0 controls.
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def yaml_safe_json(value: Any) -> bytes:
    """``value`` as JSON that YAML 1.1 parsers read back as the same value."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode() + b"\n"


def meta_data(facts: GuestFacts, *, dhcp_domain: str) -> bytes:
    doc: dict[str, Any] = {
        "instance-id": facts.uuid,
        "local-hostname": hostname_with_domain(facts, dhcp_domain),
    }
    if facts.keys:
        names = key_names(facts)
        doc["public-keys"] = {n: k.public_key for n, k in zip(names, facts.keys, strict=True)}
    if facts.availability_zone:
        doc["availability-zone"] = facts.availability_zone
    return yaml_safe_json(doc)


def user_data(facts: GuestFacts) -> bytes:
    return base64.b64decode(facts.user_data) if facts.user_data else b""


def network_config(facts: GuestFacts) -> bytes | None:
    if not facts.ports:
        return None
    ethernets: dict[str, Any] = {}
    for index, port in enumerate(facts.ports):
        net = ipaddress.ip_network(port.cidr, strict=False)
        ethernet: dict[str, Any] = {"match": {"macaddress": port.mac}, "mtu": port.mtu}
        # As network_data.json: the first address of the subnet's family.
        address = next(
            (a for a in port.addresses if ipaddress.ip_address(a).version == net.version), None
        )
        if address is not None:
            ethernet["addresses"] = [f"{address}/{net.prefixlen}"]
            if port.gateway:
                default = "0.0.0.0/0" if net.version == 4 else "::/0"
                ethernet["routes"] = [{"to": default, "via": port.gateway}]
        if port.dns:
            ethernet["nameservers"] = {"addresses": list(port.dns)}
        ethernets[f"eth{index}"] = ethernet
    return yaml_safe_json({"version": 2, "ethernets": ethernets})


def _cloud_init_parts(document: bytes | None) -> list[str]:
    """The parts cloud-init takes from a vendordata document (``convert_vendordata``: a
    dict's ``cloud-init`` value; a string or a list of strings as they are)."""
    if not document:
        return []
    try:
        value: Any = json.loads(document)
    except ValueError:
        return []
    if isinstance(value, dict):
        value = value.get("cloud-init")
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str) and item]
    return []


def vendor_data(vendor_data_json: bytes | None, vendor_data2_json: bytes | None) -> bytes:
    """NoCloud's one vendor-data from the OpenStack tree's two, in cloud-init's order."""
    parts = _cloud_init_parts(vendor_data_json) + _cloud_init_parts(vendor_data2_json)
    if not parts:
        return b""
    if len(parts) == 1:
        return parts[0].encode()
    # A boundary drawn from the content: the same parts give the same bytes (drives compare).
    boundary = "cloudseed-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
    message = MIMEMultipart(boundary=boundary)
    for part in parts:
        # text/plain: cloud-init picks each part's handler from its first line.
        message.attach(MIMEText(part, "plain", "utf-8"))
    return message.as_bytes()


def seed_files(
    facts: GuestFacts, *, dhcp_domain: str, vendor_data_json: bytes | None, vendor_data2_json: bytes
) -> dict[str, bytes]:
    """The whole seed as files (a CIDATA drive): network-config only when there are ports."""
    files = {
        META_DATA: meta_data(facts, dhcp_domain=dhcp_domain),
        USER_DATA: user_data(facts),
        VENDOR_DATA: vendor_data(vendor_data_json, vendor_data2_json),
    }
    network = network_config(facts)
    if network is not None:
        files[NETWORK_CONFIG] = network
    return files
