"""The body of ``GET /v2.1/servers/{id}/host-keys``."""

from __future__ import annotations

from typing import Any

from cloudseed.hostkeys.service import ShownKey


def host_keys(shown: list[ShownKey]) -> dict[str, Any]:
    return {
        "host_keys": [
            {
                "type": s.key.type,
                "key": s.key.key,
                "fingerprint_sha256": s.key.fingerprint_sha256,
                "source": s.source,
                "recorded_at": s.recorded_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            for s in shown
        ]
    }
