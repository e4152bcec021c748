"""meta_data.json's ``devices`` (device role tags): tagged ports only, Nova's members and order
per version, the qemu driver's fixed PCI slots, and the renderings versions share."""

from __future__ import annotations

import dataclasses
import json

from cloudseed.compute import pci_slots
from cloudseed.configdrive import contents
from cloudseed.metadata import devices, render
from cloudseed.metadata import versions as v
from cloudseed.metadata.facts import GuestFacts
from tests.support.guest_facts import facts


def tagged(tags: list[str | None]) -> GuestFacts:
    base = facts()
    (port,) = base.ports
    ports = tuple(
        dataclasses.replace(port, port_id=f"p{i}", mac=f"fa:16:3e:00:00:{i:02x}", tag=tag)
        for i, tag in enumerate(tags)
    )
    return dataclasses.replace(base, ports=ports)


def test_only_tagged_ports_with_their_fixed_slot() -> None:
    guest = tagged([None, "storage", None, "mgmt"])
    assert devices.devices(guest, v.NEWTON_ONE) == [
        {
            "type": "nic",
            "mac": "fa:16:3e:00:00:01",
            "bus": "pci",
            "address": "0000:00:11.0",
            "tags": ["storage"],
        },
        {
            "type": "nic",
            "mac": "fa:16:3e:00:00:03",
            "bus": "pci",
            "address": "0000:00:13.0",
            "tags": ["mgmt"],
        },
    ]
    rocky = devices.devices(guest, v.ROCKY)
    assert [list(d) for d in rocky] == [["vf_trusted", "type", "mac", "bus", "address", "tags"]] * 2
    assert all(d["vf_trusted"] is False for d in rocky)
    assert devices.devices(tagged([None, None]), v.EPOXY) == []


def test_a_port_past_the_last_slot_has_no_address() -> None:
    assert pci_slots.tagged_nic_slot(14) == 0x1E
    assert pci_slots.tagged_nic_slot(15) is None
    guest = tagged([None] * 15 + ["late"])
    (device,) = devices.devices(guest, v.NEWTON_ONE)
    assert (device["bus"], device["address"]) == ("none", "none")


def test_meta_data_per_version_and_shared_renderings() -> None:
    guest = tagged(["a"])
    for version, expected in (
        (v.LIBERTY, None),
        (v.NEWTON_ONE, ["type", "mac", "bus", "address", "tags"]),
        (v.OCATA, ["type", "mac", "bus", "address", "tags"]),
        (v.ROCKY, ["vf_trusted", "type", "mac", "bus", "address", "tags"]),
        (v.EPOXY, ["vf_trusted", "type", "mac", "bus", "address", "tags"]),
    ):
        variant = render.meta_data_variant(version, guest)
        doc = json.loads(render.meta_data(guest, variant, dhcp_domain="").render())
        assert ([list(d) for d in doc["devices"]] if "devices" in doc else None) == (
            [expected] if expected else None
        ), version
    # Without a tagged port, 2016-06-30 to 2018-08-27 are one rendering, as before.
    assert render.meta_data_variant(v.ROCKY, facts()) == v.NEWTON_ONE
    assert render.meta_data_variant(v.ROCKY, guest) == v.ROCKY
    assert render.meta_data_variant(v.OCATA, guest) == v.NEWTON_ONE


def test_config_drive_carries_the_devices() -> None:
    guest = tagged([None, "storage"])
    tree = contents.drive_tree(
        guest,
        contents.DriveData(dhcp_domain="novalocal", vendor_data_json=None, vendor_data2_json=b"{}"),
    )
    latest = json.loads(tree["openstack/latest/meta_data.json"])
    newton = json.loads(tree["openstack/2016-06-30/meta_data.json"])
    assert latest["devices"][0]["tags"] == ["storage"]
    assert latest["devices"][0]["vf_trusted"] is False
    assert "vf_trusted" not in newton["devices"][0]
    assert "devices" not in json.loads(tree["openstack/2015-10-15/meta_data.json"])
