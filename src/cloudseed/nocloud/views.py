"""The body of ``GET /v2.1/servers/{id}/nocloud-seed`` (and of a rotate)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cloudseed.nocloud import seeds
from cloudseed.nocloud.seeds import Seed


def nocloud_seed(*, key: bytes, base: str, server: str, seed: Seed) -> dict[str, Any]:
    url = seeds.seed_url(base, seeds.token(key, server, seed))
    expires = (
        None
        if seed.expires_at is None
        else dt.datetime.fromtimestamp(seed.expires_at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return {
        "nocloud_seed": {
            "url": url,
            "kernel_cmdline": seeds.kernel_cmdline(url),
            "expires_at": expires,
        }
    }
