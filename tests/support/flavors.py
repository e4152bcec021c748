"""A flavor exactly as an instance keeps it, for GuestSpecs built in tests.

Drivers read ``GuestSpec.flavor``, which is ``flavors.service.snapshot`` of the registry row.
Tests that wrote the stored dictionary by hand used the registry's column names
(``memory_mb``) and so hid a driver reading the wrong key; building it through the same
function the API uses keeps the two in step.
"""

from __future__ import annotations

from cloudseed.flavors.models import Flavor
from cloudseed.flavors.service import snapshot
from cloudseed.flavors.snapshots import FlavorSnapshot


def stored_flavor(
    *, ram: int, vcpus: int, disk: int = 0, ephemeral: int = 0, swap: int = 0
) -> FlavorSnapshot:
    row = Flavor(
        flavorid=f"f-{ram}-{vcpus}-{disk}",
        name=f"test.{ram}m.{vcpus}c.{disk}g",
        vcpus=vcpus,
        memory_mb=ram,
        root_gb=disk,
        ephemeral_gb=ephemeral,
        swap=swap,
    )
    return snapshot(row)
