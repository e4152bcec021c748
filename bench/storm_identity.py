"""Who the storm's requests say they come from: the project and its token on the compute API,
and the simulated Neutron metadata proxy's shared secret and signed headers.

Other benchmarks set these module attributes (bench/side_by_side.py: Keystone's project and
token, one secret for both metadata services): read PROJECT, AUTH and SECRET at call time as
``storm_identity.SECRET``, never as copies made by ``from storm_identity import SECRET``.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

PROJECT = "bench"
AUTH = {"X-Auth-Token": f"bench:{PROJECT}"}
SECRET = "storm-" + uuid.uuid4().hex


def sign(instance_id: str) -> str:
    """What the Neutron metadata proxy sends as X-Instance-ID-Signature."""
    return hmac.new(SECRET.encode(), instance_id.encode(), hashlib.sha256).hexdigest()


def proxy_headers(instance_id: str) -> dict[str, str]:
    return {
        "X-Instance-ID": instance_id,
        "X-Tenant-ID": PROJECT,
        "X-Instance-ID-Signature": sign(instance_id),
    }
