"""meta_data.json's ``devices``: the instance's tagged devices (``instance_extra
.device_metadata``, objects.py) as Nova 34 lists them for each version (nova/api/metadata/
base.py ``_get_device_metadata``). IO-free.
"""

from __future__ import annotations

from typing import Any

from cloudseed.metadata import versions as v
from cloudseed.nova_metadata.facts import InstanceFacts

_BUSES = {
    "PCIDeviceBus": "pci",
    "USBDeviceBus": "usb",
    "SCSIDeviceBus": "scsi",
    "IDEDeviceBus": "ide",
    "XenDeviceBus": "xen",
}


def devices(facts: InstanceFacts, version: str) -> list[dict[str, Any]]:
    """meta_data.json's ``devices``: tagged devices by Nova's rules for ``version`` (NIC
    VLANs from 2017-02-22, ``vf_trusted`` from 2018-08-27, shares from 2025-04-04)."""
    shown: list[dict[str, Any]] = []
    for device in facts.devices or ():
        entry: dict[str, Any] = {}
        bus = address = "none"
        if device.bus is not None:
            if device.bus not in _BUSES:
                continue
            bus = _BUSES[device.bus]
            if device.bus_address is not None:
                address = device.bus_address
        if device.kind == "NetworkInterfaceMetadata":
            vlan = device.get("vlan")
            if v.at_least(version, v.OCATA) and vlan is not None:
                entry["vlan"] = vlan
            if v.at_least(version, v.ROCKY):
                entry["vf_trusted"] = (
                    device.get("vf_trusted") if device.has("vf_trusted") else False
                )
            entry["type"] = "nic"
            entry["mac"] = device.get("mac")
            if not (device.has("tags") or "vlan" in entry or "vf_trusted" in entry):
                continue
        elif device.kind == "DiskMetadata":
            entry["type"] = "disk"
            for name in ("serial", "path"):
                if device.has(name):
                    entry[name] = device.get(name)
        elif v.at_least(version, v.EPOXY) and device.kind == "ShareMetadata":
            entry["type"] = "share"
            entry["share_id"] = device.get("share_id")
            entry["tag"] = device.get("tag")
        else:
            continue
        entry["bus"] = bus
        entry["address"] = address
        if device.has("tags"):
            entry["tags"] = device.get("tags")
        shown.append(entry)
    return shown
