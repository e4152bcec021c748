"""The hook the identity token's ``host_keys`` claim is filled from.

Issue 18 part 3 (host keys and first contact, ``cloudseed.hostkeys``) records each server's SSH
host keys, from cloud-init's phone_home or parsed from the console log; this function hands
them to the token, as OpenSSH's ``SHA256:<base64>`` fingerprints, so a relying party that
trusts the token also knows the keys the guest's sshd presents. They are the keys of the
server's current boot generation that ``GET /servers/{id}/host-keys`` shows; an empty list
until the guest has reported them.
"""

from __future__ import annotations

from cloudseed.cells.service import CellDatabases
from cloudseed.hostkeys.service import fingerprints


def host_key_fingerprints(cells: CellDatabases, instance_uuid: str) -> list[str]:
    """The SHA-256 fingerprints of the host keys recorded for ``instance_uuid`` (blocking:
    called in a worker thread; ``cells`` opens the instance's cell database)."""
    with cells.for_instance(instance_uuid).read() as session:
        return fingerprints(session, instance_uuid)
