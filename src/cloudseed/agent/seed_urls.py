"""The NoCloud seed URL a guest boots with, for images with ``cloudseed_bootstrap=nocloud``
(docs/qemu-driver.md): made, or renewed, in the server's cell each time the agent starts the
guest (spawn, rebuild, reboot, start), so a guest started again after its seed expired gets a
working URL. The driver puts it in the guest's SMBIOS serial."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from cloudseed.db.engines import Database
from cloudseed.nocloud import seeds, service
from cloudseed.nocloud.errors import SeedRaced
from cloudseed.settings import Settings

log = logging.getLogger(__name__)

# A seed that ends within this many seconds is replaced before a boot: the guest reads it while
# booting (minutes under TCG) and again when it reboots itself.
RENEW_WITHIN = 24 * 3600


@dataclass(frozen=True)
class SeedUrls:
    key: bytes
    base: str
    lifetime: int

    @classmethod
    def from_settings(cls, settings: Settings) -> SeedUrls:
        metadata = settings.metadata
        return cls(
            key=metadata.nocloud_seed_secret.encode(),
            base=metadata.nocloud_seed_url,
            lifetime=metadata.nocloud_seed_lifetime,
        )

    def for_boot(self, cell: Database, uuid: str) -> str | None:
        """The URL of ``uuid``'s seed for a boot now; None when its seed is revoked."""
        now = time.time()
        seed = cell.run(
            lambda session: service.for_boot(
                session, uuid, now=now, lifetime=self.lifetime, renew_within=RENEW_WITHIN
            ),
            write=True,
            lost_to=(SeedRaced,),
        )
        if seed is None:
            log.warning("server %s boots without a NoCloud seed: its seed is revoked", uuid)
            return None
        return seeds.seed_url(self.base, seeds.token(self.key, uuid, seed))
