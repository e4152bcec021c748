"""What a guest may see of its instance: a small immutable snapshot of the instance record.

Built from the record alone (the key pair snapshot, never the key pair table). Kept small on
purpose: every metadata worker holds one per cached instance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Server metadata item by which a user makes session tokens mandatory for one instance, like
# EC2's per-instance HttpTokens=required.
TOKENS_REQUIRED_ITEM = "metadata_http_tokens"


@dataclass(frozen=True, slots=True)
class PortFacts:
    port_id: str
    network_id: str
    mac: str
    mtu: int
    cidr: str
    gateway: str | None
    dns: tuple[str, ...]
    addresses: tuple[str, ...]  # fixed IPs, allocation order


@dataclass(frozen=True, slots=True)
class KeyFacts:
    name: str
    type: str
    public_key: str


@dataclass(frozen=True, slots=True)
class GuestFacts:
    uuid: str
    ec2_number: int  # the instance row id, shown as i-%08x
    project_id: str
    user_id: str
    name: str
    hostname: str  # without the DHCP domain
    launch_index: int
    availability_zone: str | None
    image_ref: str
    flavor_name: str
    reservation_id: str
    key_name: str | None
    key_data: str | None  # the EC2 tree's key (instances.key_data)
    keys: tuple[KeyFacts, ...]  # the OpenStack tree's keys (the snapshot)
    meta: tuple[tuple[str, str], ...]  # server metadata, sorted
    user_data: str | None  # base64 text as stored
    boot_roles: str
    password: str
    ports: tuple[PortFacts, ...]
    config_drive: bool

    @property
    def tokens_required(self) -> bool:
        return dict(self.meta).get(TOKENS_REQUIRED_ITEM) == "required"

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(a for p in self.ports for a in p.addresses)


PASSWORD_CHUNKS = tuple(f"password_{i}" for i in range(4))


def facts_from_record(record: Any) -> GuestFacts:
    """``record`` is a servers.records.ServerRecord."""
    instance = record.instance
    keys = tuple(KeyFacts(name=k["name"], type=k.get("type", "ssh"),
                          public_key=k["public_key"]) for k in record.keypairs)
    key_data = instance.key_data
    if keys and key_data == keys[0].public_key:
        key_data = keys[0].public_key  # one string for both trees, not two copies
    ports = []
    for port, ips in record.ports:
        info = json.loads(port.network_info)
        ports.append(PortFacts(port_id=port.uuid, network_id=port.network_id,
                               mac=port.mac_address, mtu=port.mtu, cidr=info["cidr"],
                               gateway=info.get("gateway"),
                               dns=tuple(info.get("dns_nameservers", ())),
                               addresses=tuple(ip.address for ip in ips)))
    sysmeta = record.system_metadata
    return GuestFacts(
        uuid=instance.uuid, ec2_number=instance.id, project_id=instance.project_id,
        user_id=instance.user_id, name=instance.display_name, hostname=instance.hostname,
        launch_index=instance.launch_index, availability_zone=instance.availability_zone,
        image_ref=instance.image_ref, flavor_name=str(record.flavor.get("name", "")),
        reservation_id=instance.reservation_id, key_name=instance.key_name, key_data=key_data,
        keys=keys, meta=tuple(sorted(record.metadata.items())), user_data=instance.user_data,
        boot_roles=sysmeta.get("boot_roles", ""),
        password="".join(sysmeta.get(k, "") for k in PASSWORD_CHUNKS),
        ports=tuple(ports), config_drive=bool(instance.config_drive))
