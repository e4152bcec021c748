"""``known_hosts`` lines for a server's host keys. IO-free.

OpenSSH looks a host up in ``known_hosts`` by the name it connects to: the address as typed for
port 22, ``[ADDRESS]:PORT`` for any other port (which is how a cloudseed SSH forward,
``ssh -p PORT USER@ADDRESS``, is looked up). One line per key, the names comma-separated, as
``ssh`` itself writes them; no hashing (``ssh-keygen -H`` hashes a file afterwards if wanted).
"""

from __future__ import annotations

from collections.abc import Iterable

from cloudseed.hostkeys.key_lines import HostKey

SSH_PORT = 22


def host_pattern(address: str, port: int = SSH_PORT) -> str:
    """How ssh names ``address`` at ``port`` in known_hosts."""
    host = address[1:-1] if address.startswith("[") and address.endswith("]") else address
    return host if port == SSH_PORT else f"[{host}]:{port}"


def forward_pattern(recorded: str) -> str | None:
    """The pattern of a recorded SSH forward (``ADDRESS:PORT``), or None if it is not one."""
    address, _, port = recorded.rpartition(":")
    if not address or not port.isdigit() or len(port) > 5:
        return None
    return host_pattern(address, int(port))


def lines(hosts: Iterable[str], keys: Iterable[HostKey]) -> list[str]:
    """``HOSTS TYPE BASE64`` for each key; no line when there is no host."""
    names = ",".join(dict.fromkeys(h for h in hosts if h))
    if not names:
        return []
    return [f"{names} {key.key}" for key in keys]
