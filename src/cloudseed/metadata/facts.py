"""What a guest may see of its instance: a small immutable snapshot of the instance record.

Built from the record alone (the key pair snapshot, never the key pair table). Kept small on
purpose: every metadata worker holds one per cached instance.

Keys are the live keys of 2.106 (``servers/live_keys/delivery.py`` decides which are current):
``metadata/delivery.py`` hands in the keys current when the record was read, each with its
expiry, and ``at`` leaves out those that expire later, so no document outlives a key's expiry
and no database read is needed for it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cloudseed.metadata.sharing import Sharing
from cloudseed.nocloud.seeds import SYSTEM_METADATA_KEY as NOCLOUD_SEED
from cloudseed.nocloud.seeds import Seed, parse_stored
from cloudseed.servers.metadata_options import options as md_options
from cloudseed.servers.metadata_options.options import MetadataOptions
from cloudseed.servers.notices import rules as notice_rules
from cloudseed.servers.system_metadata import PASSWORD_CHUNKS, security_group_names
from cloudseed.vendordata.request import VendordataRequest

# Server metadata item by which a user makes session tokens mandatory for one instance, like
# EC2's per-instance HttpTokens=required (before 2.109's metadata options, which win over it).
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
    tag: str | None = None  # the device role tag (meta_data.json's devices)


@dataclass(frozen=True, slots=True)
class KeyFacts:
    name: str
    type: str
    public_key: str
    expires_at: float | None = None  # POSIX time from which it is no longer served


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
    keys: tuple[KeyFacts, ...]  # every key served, in order (both trees)
    meta: tuple[tuple[str, str], ...]  # server metadata, sorted
    user_data: str | None  # base64 text as stored
    boot_roles: str
    password: str
    ports: tuple[PortFacts, ...]
    config_drive: bool
    security_groups: tuple[str, ...] = ()  # names, as the API shows them
    created_at: dt.datetime | None = None  # naive UTC: EC2's pendingTime in signed identity
    # Live keys: the generation of the key set, the one cloud-init applied at first boot, the
    # one the guest is known to hold, and when a key served now expires (None: none does).
    keys_generation: int = 1
    keys_boot_generation: int = 1
    keys_applied_generation: int = 0
    keys_refresh_at: float | None = None
    # The server's NoCloud seed (2.107), which the seed URLs' tokens are checked against.
    nocloud_seed: Seed | None = None
    # The server's metadata options (2.109; servers/metadata_options/options.py): None when it
    # sets none, as most servers, so the checks on every request cost one comparison.
    metadata_options: MetadataOptions | None = None
    # The server's tags (2.26), sorted: guests read them when the options enable it.
    tags: tuple[str, ...] = ()
    # Its lifecycle notices' events (2.111, servers/notices/rules.py), oldest first.
    events: tuple[notice_rules.Event, ...] = ()

    def at(self, now: float) -> GuestFacts:
        """These facts at POSIX time ``now``: keys that expired by then left out (the rule of
        key_delivery.current: a key is served while now < expires_at)."""
        if self.keys_refresh_at is None or now < self.keys_refresh_at:
            return self
        keys = tuple(k for k in self.keys if k.expires_at is None or now < k.expires_at)
        later = [k.expires_at for k in keys if k.expires_at is not None]
        return dataclasses.replace(self, keys=keys, keys_refresh_at=min(later, default=None))

    def requires_token(self, cloud_default: bool) -> bool:
        """Whether a request without a session token is refused: the server's http_tokens,
        else the cloud's ``[metadata] require_token`` or the metadata item. Asked on every
        request without a token: a comparison or two, then one loop in C."""
        options = self.metadata_options
        if options is not None and options.http_tokens is not None:
            return options.http_tokens == md_options.REQUIRED
        return cloud_default or (TOKENS_REQUIRED_ITEM, "required") in self.meta

    @property
    def endpoint_disabled(self) -> bool:
        options = self.metadata_options
        return options is not None and options.http_endpoint == md_options.DISABLED

    @property
    def tags_enabled(self) -> bool:
        options = self.metadata_options
        return options is not None and options.instance_metadata_tags == md_options.ENABLED

    @property
    def hop_limit(self) -> int | None:
        """The server's own hop limit for the token PUT's answer (None: the cloud's)."""
        options = self.metadata_options
        return options.http_put_response_hop_limit if options is not None else None

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(a for p in self.ports for a in p.addresses)


def _shared(value: str | None) -> Any:
    """One copy of a string many guests have (project, image, network, key, metadata...):
    a worker holds thousands of guests, most of them alike."""
    return sys.intern(value) if value is not None else None


# One copy of the larger values guests of a boot storm have in common (sharing.py): user
# data, metadata items, key sets, security groups, reservation ids, MTUs. Bounded: at most
# 1,024 values of 4 KiB each outlive their guests.
shared = Sharing(entries=1024, largest=4096)
# User data larger than that (up to [api] max_user_data_bytes, 16 MiB at most): one copy of
# each value among the last few distinct ones loaded, so the hundred servers of one boot storm
# with the same 16 MiB Ignition config hold it once, not a hundred times. Few entries, since
# each may be large: at most 4 values outlive their guests (64 MiB at the option's ceiling).
shared_user_data = Sharing(entries=4, largest=sys.maxsize)


def _user_data(value: str | None) -> str | None:
    if value is None or sys.getsizeof(value) <= 4096:
        return shared(value)
    return shared_user_data(value)


def facts_from_record(
    record: Any,
    *,
    keys: Sequence[tuple[Mapping[str, Any], float | None]],
    keys_refresh_at: float | None = None,
) -> GuestFacts:
    """``record`` is a servers.records.ServerRecord; ``keys`` are its stored key entries that
    are served, each with its expiry as POSIX time, and ``keys_refresh_at`` the earliest of
    those (``metadata/delivery.py`` decides both)."""
    instance = record.instance
    extra = record.extra
    key_facts = shared(
        tuple(
            KeyFacts(
                name=_shared(entry["name"]),
                type=_shared(entry.get("type", "ssh")),
                public_key=_shared(entry["public_key"]),
                expires_at=expires_at,
            )
            for entry, expires_at in keys
        )
    )
    ports = []
    for port, ips in record.ports:
        info = json.loads(port.network_info)
        ports.append(
            PortFacts(
                port_id=port.uuid,
                network_id=_shared(port.network_id),
                mac=port.mac_address,
                mtu=shared(port.mtu),
                cidr=_shared(info["cidr"]),
                gateway=_shared(info.get("gateway")),
                dns=shared(tuple(_shared(d) for d in info.get("dns_nameservers", ()))),
                addresses=tuple(ip.address for ip in ips),
                tag=port.tag,
            )
        )
    sysmeta = record.system_metadata
    name = instance.display_name
    flavor = record.flavor  # parsed from its stored document at each look
    return GuestFacts(
        uuid=instance.uuid,
        ec2_number=instance.id,
        project_id=_shared(instance.project_id),
        user_id=_shared(instance.user_id),
        name=name,
        # Usually the name itself (hostnames are made from names): then the same string.
        hostname=name if instance.hostname == name else instance.hostname,
        launch_index=instance.launch_index,
        availability_zone=_shared(instance.availability_zone),
        image_ref=_shared(instance.image_ref),
        flavor_name=_shared(flavor.name if flavor else ""),
        reservation_id=shared(instance.reservation_id),
        keys=key_facts,
        meta=shared(tuple((_shared(k), _shared(v)) for k, v in sorted(record.metadata.items()))),
        user_data=_user_data(instance.user_data),
        boot_roles=_shared(sysmeta.get("boot_roles", "")),
        password="".join(sysmeta.get(k, "") for k in PASSWORD_CHUNKS),
        ports=tuple(ports),
        config_drive=bool(instance.config_drive),
        security_groups=shared(
            tuple(_shared(g) for g in security_group_names(sysmeta, has_ports=bool(ports)))
        ),
        created_at=instance.created_at,
        # A record without its extra row (never written) has the columns' defaults unset.
        keys_generation=extra.keys_generation or 1,
        keys_boot_generation=extra.keys_boot_generation or 1,
        keys_applied_generation=extra.keys_applied_generation or 0,
        keys_refresh_at=keys_refresh_at,
        nocloud_seed=parse_stored(sysmeta.get(NOCLOUD_SEED)),
        metadata_options=shared(
            md_options.from_stored(sysmeta.get(md_options.SYSTEM_METADATA_KEY))
        ),
        tags=shared(tuple(_shared(t) for t in record.tags)),
        events=notice_rules.parse_stored(sysmeta.get(notice_rules.SYSTEM_METADATA_KEY)),
    )


def vendordata_request(facts: GuestFacts) -> VendordataRequest:
    """What DynamicJSON targets are posted about this guest."""
    return VendordataRequest(
        project_id=facts.project_id,
        instance_id=facts.uuid,
        image_id=facts.image_ref,
        user_data=facts.user_data,
        hostname=facts.hostname,
        metadata=dict(facts.meta),
        boot_roles=facts.boot_roles,
    )
