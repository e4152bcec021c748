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


class Verifier:
    """Checks signatures under one secret. The key's HMAC state is set up once: copying it is
    cheaper than keying a new one for every request of a boot storm."""

    def __init__(self, secret: str) -> None:
        self._keyed = hmac.new(secret.encode(), digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return "Verifier(<secret>)"

    def valid(self, value: str, signature: str | None) -> bool:
        mac = self._keyed.copy()
        mac.update(value.encode())
        expected = mac.hexdigest().encode()
        return signature is not None and hmac.compare_digest(expected, signature.encode())
