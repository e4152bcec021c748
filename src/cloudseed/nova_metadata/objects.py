"""Nova's serialized versioned objects, as ``instance_extra`` stores them, read for what the
metadata API shows of them. IO-free.

Nova writes each object as oslo.versionedobjects' primitive: ``{"nova_object.name": class,
"nova_object.version": ..., "nova_object.data": {field: value}}``, nested for object fields,
with only the fields that are set. "Is the field set" (Nova's ``'vlan' in device``) is "is the
key in ``nova_object.data``". The columns read:

- ``keypairs``: a KeyPairList; the metadata API shows its first key pair.
- ``flavor``: ``{"cur": Flavor, "old": ..., "new": ...}``; the EC2 tree shows cur's name.
- ``device_metadata``: an InstanceDeviceMetadata, whose devices become meta_data.json's
  ``devices`` (render.py decides per version which are shown, and how).
- ``numa_topology``: an InstanceNUMATopology; its cells' ``pcpuset`` are ``dedicated_cpus``.
  Cells written before Victoria (version 1.4, ``cpu_policy`` dedicated) kept their pinned
  CPUs in ``cpuset``: Nova reads them as pinned (and writes the conversion back; the drop-in
  only reads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

NAME = "nova_object.name"
VERSION = "nova_object.version"
DATA = "nova_object.data"

# The bus classes Nova's metadata API names, and what it calls them.
BUSES = {
    "PCIDeviceBus": "pci",
    "USBDeviceBus": "usb",
    "SCSIDeviceBus": "scsi",
    "IDEDeviceBus": "ide",
    "XenDeviceBus": "xen",
}


class Unreadable(ValueError):
    """A column does not hold what Nova writes there."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    name: str
    type: str
    public_key: str


@dataclass(frozen=True, slots=True)
class Device:
    """One device of ``device_metadata``: its class name and its set fields (a bus as its
    class name and its set fields too)."""

    kind: str  # NetworkInterfaceMetadata, DiskMetadata, ShareMetadata, ...
    fields: tuple[tuple[str, Any], ...]
    bus: str | None  # the bus's class name, None when the device has none
    bus_address: str | None  # None: the bus has no address set

    def get(self, name: str) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        return None

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.fields)


def _load(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise Unreadable(f"{what} is not JSON") from None


def _data(primitive: Any, what: str) -> dict[str, Any]:
    if not isinstance(primitive, dict) or not isinstance(primitive.get(DATA), dict):
        raise Unreadable(f"{what} is not a serialized Nova object")
    data: dict[str, Any] = primitive[DATA]
    return data


def keypairs(text: str | None) -> tuple[KeyPair, ...]:
    """The key pairs of ``instance_extra.keypairs``, in order (none for NULL or empty, as
    Nova: an instance whose key pair was never copied there shows no key)."""
    if not text:
        return ()
    found = []
    for item in _data(_load(text, "keypairs"), "keypairs").get("objects") or []:
        data = _data(item, "a key pair")
        found.append(
            KeyPair(
                name=data.get("name") or "",
                type=data.get("type") or "ssh",
                public_key=data.get("public_key") or "",
            )
        )
    return tuple(found)


def flavor_name(text: str | None) -> str | None:
    """The current flavor's name (None: no flavor stored)."""
    document = _load(text, "flavor")
    if not isinstance(document, dict) or document.get("cur") is None:
        return None
    name = _data(document["cur"], "the flavor").get("name")
    return None if name is None else str(name)


def devices(text: str | None) -> tuple[Device, ...] | None:
    """The devices of ``instance_extra.device_metadata`` (None: the column is NULL)."""
    document = _load(text, "device_metadata")
    if document is None:
        return None
    found = []
    for item in _data(document, "device_metadata").get("devices") or []:
        data = _data(item, "a device")
        bus = data.get("bus")
        bus_name = bus_address = None
        if isinstance(bus, dict):
            bus_name = str(bus.get(NAME))
            bus_data = _data(bus, "a device bus")
            if "address" in bus_data:
                bus_address = bus_data["address"]
        found.append(
            Device(
                kind=str(item.get(NAME)),
                fields=tuple((k, v) for k, v in data.items() if k != "bus"),
                bus=bus_name,
                bus_address=bus_address,
            )
        )
    return tuple(found)


def dedicated_cpus(text: str | None) -> tuple[int, ...]:
    """The pinned CPUs of ``instance_extra.numa_topology``, sorted (Nova's
    ``_get_instance_dedicated_cpus``)."""
    document = _load(text, "numa_topology")
    if document is None or NAME not in document:
        # NULL, or the pre-versioned-objects format Nova converts on read; it has no pinned
        # CPUs in the sense of pcpuset.
        return ()
    pinned: set[int] = set()
    for cell in _data(document, "numa_topology").get("cells") or []:
        data = _data(cell, "a NUMA cell")
        version = tuple(int(p) for p in str(cell.get(VERSION, "0.0")).split("."))
        if version < (1, 5) and version >= (1, 4) and data.get("cpu_policy") == "dedicated":
            pinned.update(data.get("cpuset") or ())
        else:
            pinned.update(data.get("pcpuset") or ())
    return tuple(sorted(pinned))
