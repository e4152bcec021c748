"""The hook the identity token's ``host_keys`` claim is filled from.

Issue 18 part 3 (host keys and first contact) records each server's SSH host keys (from
cloud-init's phone_home, or parsed from the console log); this function is where it hands
them to the token, as OpenSSH's ``SHA256:<base64>`` fingerprints, so a relying party that
trusts the token also knows the keys the guest's sshd presents. Until then it answers with
no keys, and the claim is an empty list.
"""

from __future__ import annotations

from cloudseed.cells.service import CellDatabases


def host_key_fingerprints(cells: CellDatabases, instance_uuid: str) -> list[str]:
    """The SHA-256 fingerprints of the host keys recorded for ``instance_uuid`` (blocking:
    called in a worker thread; ``cells`` opens the instance's cell database)."""
    del cells, instance_uuid  # filled in by part 3, which records the keys
    return []
