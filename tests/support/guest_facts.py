"""What the metadata tree is rendered from, built without a database: a guest's facts
and a server record shaped as records.load_many builds one."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

from cloudseed.flavors.snapshots import FlavorSnapshot
from cloudseed.metadata.facts import GuestFacts, KeyFacts, PortFacts
from cloudseed.servers.models import Instance, InstanceExtra


def facts(**changes: object) -> GuestFacts:
    values: dict[str, object] = dict(
        uuid="6f2c1f55-2b1e-4a43-9b8e-3b3c8f0d9a10",
        ec2_number=7,
        project_id="proj",
        user_id="alice",
        name="web 1",
        hostname="web-1",
        launch_index=0,
        availability_zone=None,
        image_ref="0a1b2c3d-0000-4000-8000-000000000000",
        flavor_name="m1.tiny",
        reservation_id="r-1234",
        keys=(KeyFacts("k", "ssh", "ssh-ed25519 AAAA k"),),
        meta=(("a", "1"),),
        user_data=base64.b64encode(b"hello").decode(),
        boot_roles="member",
        password="",
        config_drive=False,
        ports=(
            PortFacts(
                port_id="11111111-2222-3333-4444-555555555555",
                network_id="n1",
                mac="fa:16:3e:00:00:01",
                mtu=1450,
                cidr="10.0.0.0/24",
                gateway="10.0.0.1",
                dns=("10.0.0.2", "10.0.0.2"),
                addresses=("10.0.0.5", "fd00::5", "10.0.0.6"),
            ),
        ),
    )
    values.update(changes)
    return GuestFacts(**values)  # type: ignore[arg-type]


def record(entries: list[dict[str, Any]], **extra: Any) -> Any:
    """A ServerRecord-shaped object, as records.load_many builds one."""
    instance = Instance(
        uuid="u-1",
        id=3,
        project_id="p",
        user_id="alice",
        display_name="vm",
        hostname="vm",
        launch_index=0,
        availability_zone=None,
        image_ref="i",
        reservation_id="r-1",
        user_data=None,
        config_drive="",
    )
    return SimpleNamespace(
        instance=instance,
        extra=InstanceExtra(instance_uuid="u-1", **extra),
        keypairs=entries,
        metadata={},
        system_metadata={},
        ports=[],
        tags=[],
        flavor=FlavorSnapshot(flavorid="1", name="m1", vcpus=1, memory_mb=512, root_gb=1),
    )
