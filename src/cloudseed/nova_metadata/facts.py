"""What Nova's metadata API shows of one instance, as a small immutable snapshot made from its
rows (``facts_from_rows``). IO-free: the rows come in as mappings, the EC2 ids as strings
(loading.py reads and, where Nova would, creates them).

The snapshot keeps what the documents are rendered from and nothing else, already in the
shape render.py needs: the metadata items in the order Nova reads them, the first key pair of
``instance_extra.keypairs`` (meta_data.json) beside ``key_name``/``key_data`` (the EC2 tree),
the password from ``password_0..3``, the block device mapping the EC2 tree shows (Nova's
``block_device.instance_block_mapping``), ``network_data.json`` (network.py), the devices
(objects.py), the injected network template (interfaces.py) and ``created_at`` (signed
identity). ``version`` is a digest of all of it: the same rows give the same version in every
worker and process, so it can stand in an ETag.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cloudseed.metadata.facts import TOKENS_REQUIRED_ITEM
from cloudseed.nova_metadata import interfaces, network, objects

# Nova's block_device._DEFAULT_MAPPINGS: shown when the instance has no root device name.
DEFAULT_MAPPINGS = (
    ("ami", "sda1"),
    ("ephemeral0", "sda2"),
    ("root", "/dev/sda1"),
    ("swap", "sda3"),
)
_DEV = re.compile(r"^/dev/")


@dataclass(frozen=True, slots=True)
class Ec2Ids:
    instance_id: str
    ami_id: str | None
    kernel_id: str | None
    ramdisk_id: str | None


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    uuid: str
    project_id: str
    hostname: str | None
    display_name: str | None
    launch_index: int | None
    availability_zone: str | None
    reservation_id: str | None
    image_ref: str | None
    key_name: str | None
    key_data: str | None
    keypair: objects.KeyPair | None  # the first of instance_extra.keypairs
    meta: tuple[tuple[str, str], ...]
    user_data: str | None  # base64 as stored
    password: str | None  # password_0..3 joined; None when empty, as Nova
    boot_roles: str
    flavor_name: str | None
    ec2: Ec2Ids
    block_devices: tuple[tuple[str, str | None], ...]
    network_data: dict[str, Any] | None = field(hash=False)
    addresses: network.Addresses
    fixed_addresses: tuple[str, ...]  # every fixed IP, both families
    devices: tuple[objects.Device, ...] | None
    dedicated_cpus: tuple[int, ...]
    created_at: dt.datetime | None = None  # naive UTC: signed identity's pendingTime
    network_config: bytes | None = None  # Nova's injected network template (interfaces.py)
    version: str = ""
    # The compute host, which no document shows: left out of repr and so of ``version``
    # (a migrated guest's documents are the same); hosts.py wakes a host's guests by it.
    host: str | None = field(default=None, repr=False, compare=False)

    @property
    def tokens_required(self) -> bool:
        """cloudseed's per-instance EC2 HttpTokens=required: the metadata item
        ``metadata_http_tokens=required``, as on cloudseed's own servers."""
        return (TOKENS_REQUIRED_ITEM, "required") in self.meta

    @property
    def user_data_raw(self) -> bytes | None:
        """The user data as the guest gets it: decoded as Nova decodes it (lenient base64)."""
        if self.user_data is None:
            return None
        try:
            return base64.b64decode(self.user_data)
        except (binascii.Error, ValueError):
            return None


def password_of(system_metadata: Mapping[str, str | None]) -> str | None:
    """Nova's extract_password: every ``password_*`` item, in key order, joined."""
    joined = "".join(
        system_metadata[k] or "" for k in sorted(system_metadata) if k.startswith("password_")
    )
    return joined or None


def block_devices(
    instance: Mapping[str, Any], bdms: Iterable[Mapping[str, Any]]
) -> tuple[tuple[str, str | None], ...]:
    """The EC2 ``block-device-mapping`` of an instance and its live block device mappings
    (in row order): the root, ephemerals and swap (the instance's defaults, overridden by
    blank mappings), volumes as ``ebsN`` by device name."""
    root = instance.get("root_device_name")
    if root is None:
        return DEFAULT_MAPPINGS
    mappings: dict[str, str | None] = {"ami": _DEV.sub("", root), "root": root}
    if instance.get("default_ephemeral_device"):
        mappings["ephemeral0"] = instance["default_ephemeral_device"]
    if instance.get("default_swap_device"):
        mappings["swap"] = instance["default_swap_device"]
    volumes: list[str | None] = []
    blanks: list[Mapping[str, Any]] = []
    for bdm in bdms:
        if bdm.get("destination_type") == "volume":
            volumes.append(bdm.get("device_name"))
        elif bdm.get("source_type") == "blank":
            blanks.append(bdm)
    # Sorted by name, a missing name first (Nova's order).
    for number, device in enumerate(sorted(volumes, key=lambda d: (d is not None, d or ""))):
        mappings[f"ebs{number}"] = device
    swaps = [b for b in blanks if b.get("guest_format") == "swap"]
    if swaps:
        mappings["swap"] = swaps[-1].get("device_name")
    for number, blank in enumerate(b for b in blanks if b.get("guest_format") != "swap"):
        mappings[f"ephemeral{number}"] = blank.get("device_name")
    return tuple(mappings.items())


def facts_from_rows(
    instance: Mapping[str, Any],
    *,
    extra: Mapping[str, Any] | None,
    metadata: Iterable[tuple[str, str]],
    system_metadata: Mapping[str, str | None],
    network_info: str | None,
    bdms: Iterable[Mapping[str, Any]],
    ec2: Ec2Ids,
) -> InstanceFacts:
    """The snapshot of one instance. ``objects.Unreadable`` or ``network.Unreadable`` when a
    column does not hold what Nova writes there."""
    extra = extra or {}
    vifs = network.parse(network_info)
    keypairs = objects.keypairs(extra.get("keypairs"))
    facts = InstanceFacts(
        uuid=instance["uuid"],
        project_id=instance["project_id"],
        hostname=instance["hostname"],
        display_name=instance["display_name"],
        launch_index=instance["launch_index"],
        availability_zone=instance["availability_zone"],
        reservation_id=instance["reservation_id"],
        image_ref=instance["image_ref"],
        key_name=instance["key_name"],
        key_data=instance["key_data"],
        keypair=keypairs[0] if keypairs else None,
        meta=tuple(metadata),
        user_data=instance["user_data"],
        password=password_of(system_metadata),
        boot_roles=system_metadata.get("boot_roles") or "",
        flavor_name=objects.flavor_name(extra.get("flavor")),
        ec2=ec2,
        block_devices=block_devices(instance, bdms),
        network_data=network.network_data(vifs),
        addresses=network.addresses(vifs),
        fixed_addresses=network.all_fixed(vifs),
        devices=objects.devices(extra.get("device_metadata")),
        dedicated_cpus=objects.dedicated_cpus(extra.get("numa_topology")),
        created_at=instance.get("created_at"),
        network_config=interfaces.network_template(vifs),
        host=instance.get("host"),
    )
    digest = hashlib.blake2b(repr(facts).encode(), digest_size=8).hexdigest()
    return dataclasses.replace(facts, version=digest)
