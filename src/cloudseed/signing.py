"""The metadata proxy's signature: hex HMAC-SHA256 of a value (an instance uuid, a provider
name) under ``[neutron] metadata_proxy_shared_secret``, as Neutron's metadata agent makes it.

Two sides use it: whoever relays a guest's requests signs (the qemu driver writes the signed
headers into its relay's config), and the metadata service checks. It lives here, below both,
so the compute driver does not import the metadata service to sign.
"""

from __future__ import annotations

import hashlib
import hmac


def sign(secret: str, value: str) -> str:
    return hmac.new(secret.encode(), value.encode(), hashlib.sha256).hexdigest()


# Signatures found valid, remembered (signature -> value) so that a guest's every request after
# its first costs a dict lookup, not an HMAC: the proxy signs the same instance id every time.
# Emptied when full, so a flood of odd values cannot grow it. A guest's requests come together
# (a boot's crawl), so a few thousand cover every guest booting at once; one entry per cached
# guest (65,536 before) held 230 bytes each of a worker's 5 KiB per guest (docs/benchmarks.md).
_REMEMBERED_MAX = 4096


class Verifier:
    """Checks signatures under one secret. The key's HMAC state is set up once: copying it is
    cheaper than keying a new one for every request of a boot storm. Valid signatures are
    remembered; only a valid signature is ever a key, so a lookup with a guessed one tells
    nothing that the HMAC check would not."""

    def __init__(self, secret: str) -> None:
        self._keyed = hmac.new(secret.encode(), digestmod=hashlib.sha256)
        self._valid: dict[str, str] = {}

    def __repr__(self) -> str:
        return "Verifier(<secret>)"

    def valid(self, value: str, signature: str | None) -> bool:
        if signature is None:
            return False
        if self._valid.get(signature) == value:
            return True
        mac = self._keyed.copy()
        mac.update(value.encode())
        if not hmac.compare_digest(mac.hexdigest().encode(), signature.encode()):
            return False
        if len(self._valid) >= _REMEMBERED_MAX:
            self._valid.clear()
        self._valid[signature] = value
        return True
