"""Nova's zero-disk rule (OSSN-0083), for create and rebuild: a flavor with disk 0 sizes the
root disk by the image, so only an administrator may boot an image on one.

Nova checks it on create and on rebuild (``_checks_for_create_and_rebuild``), unless the
root disk is a volume (policy ``os_compute_api:servers:create:zero_disk_flavor``, admin only
since Ussuri). cloudseed has no volumes, so every server is image-booted.
"""

from __future__ import annotations

from cloudseed.servers.errors import VolumeBackedRequiredForZeroDiskFlavor


def refuse_zero_disk_flavor_unless_admin(*, root_gb: int, admin: bool) -> None:
    if root_gb == 0 and not admin:
        raise VolumeBackedRequiredForZeroDiskFlavor()
