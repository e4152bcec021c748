"""meta_data.json's ``devices``: the server's tagged NICs, as Nova lists device role tags
(nova/api/metadata/base.py ``_get_device_metadata``, from 2016-06-30). IO-free.

A port is listed when its ``networks`` item had a ``tag`` (2.32, 2.42): ``type: nic``, its MAC,
its bus and address (the PCI slot the qemu driver pins a tagged NIC to, compute/pci_slots.py)
and ``tags: [tag]``; from 2018-08-27 ``vf_trusted`` (always false: cloudseed's NICs are virtio,
no SR-IOV virtual functions). No ``vlan``: cloudseed's networks are untagged (a flat bridge or
user-mode network), so no port has one, and Nova leaves ``vlan`` out for such ports. Untagged
ports are not listed, as in Nova (which lists a NIC only with a tag or a VLAN). No disks: a
server's one disk takes no tag (``block_device_mapping_v2`` tags are not kept).
"""

from __future__ import annotations

from typing import Any

from cloudseed.compute import pci_slots
from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts


def devices(facts: GuestFacts, version: str) -> list[dict[str, Any]]:
    """The ``devices`` list for ``version`` (2016-06-30 or later), members in Nova's order."""
    shown: list[dict[str, Any]] = []
    for index, port in enumerate(facts.ports):
        if not port.tag:
            continue
        entry: dict[str, Any] = {}
        if v.at_least(version, v.ROCKY):
            entry["vf_trusted"] = False
        entry["type"] = "nic"
        entry["mac"] = port.mac
        slot = pci_slots.tagged_nic_slot(index)
        entry["bus"] = "none" if slot is None else "pci"
        entry["address"] = "none" if slot is None else pci_slots.pci_address(slot)
        entry["tags"] = [port.tag]
        shown.append(entry)
    return shown


def variant_steps(facts: GuestFacts | None) -> tuple[str, ...]:
    """The versions at which a guest's ``devices`` changes, beyond the one that brought it:
    2018-08-27 (``vf_trusted``) when it has a tagged port, else none."""
    if facts is not None and any(port.tag for port in facts.ports):
        return (v.ROCKY,)
    return ()
