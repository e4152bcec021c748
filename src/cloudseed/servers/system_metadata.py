"""Keys of an instance's system metadata that more than one package reads (IO-free).

The guest's password is kept as Nova keeps it: up to four 255-character chunks under
``password_0`` .. ``password_3``. ``servers/lifecycle/password.py`` writes them; the metadata
service's IO-free ``facts.py`` joins them, which is why the layout lives here and not beside the
writes.

``ssh_forward`` is the host ``ADDR:PORT`` leading to the guest's port 22 (the qemu driver's
opt-in forward): the compute agent writes it after each operation, from the driver's answer,
and removes it when there is none; ``cloudseed server ssh`` on any node reads it. Guests do not
see it.

``security_groups`` is the server's security group names, a JSON list: the API shows them and
the metadata service serves them (EC2's ``security-groups``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

# The system metadata keys, in order, that hold the password's 255-character chunks.
PASSWORD_CHUNKS = tuple(f"password_{i}" for i in range(4))
PASSWORD_CHUNK_SIZE = 255
PASSWORD_MAX_SIZE = PASSWORD_CHUNK_SIZE * len(PASSWORD_CHUNKS)  # 1020 bytes

# The running guest's SSH forward, "ADDR:PORT" (absent: none).
SSH_FORWARD = "ssh_forward"

# The server's security group names, a JSON list (servers/lifecycle/security_groups.py writes it).
SECURITY_GROUPS = "security_groups"
DEFAULT_SECURITY_GROUP = "default"


def security_group_names(system_metadata: Mapping[str, str], *, has_ports: bool) -> list[str]:
    """The server's security groups. In Nova they are its ports' (Neutron's), so a server
    without ports has none; a server from before cloudseed kept them is in "default"."""
    stored = system_metadata.get(SECURITY_GROUPS)
    if stored is None:
        return [DEFAULT_SECURITY_GROUP] if has_ports else []
    names: list[str] = json.loads(stored)
    return names
