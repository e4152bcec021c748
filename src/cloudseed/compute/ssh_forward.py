"""A guest's SSH forward: the opt-in, the port choice and its forms (IO-free; whether a port is
free is asked of the caller).

The qemu driver's guests are on user-mode networking with ``restrict=on``, so nothing reaches
them. A server whose metadata item ``cloudseed:ssh_forward`` is ``true`` (``openstack server
create --property cloudseed:ssh_forward=true``) gets one host port, from ``[qemu]
ssh_forward_ports`` on ``ssh_forward_address``, forwarded to its port 22 (slirp's
``hostfwd``, which ``restrict=on`` lets through: it is a connection from the host, not one the
guest opens). Server metadata rather than a flavor or image property, so a user opts in per
server with the standard clients and no new API.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

METADATA_KEY = "cloudseed:ssh_forward"
GUEST_PORT = 22
_YES = frozenset({"true", "yes", "on", "1"})


def wanted(metadata: Mapping[str, str]) -> bool:
    """Whether the server asked for a forward (``true``, as the settings' booleans read it)."""
    return metadata.get(METADATA_KEY, "").strip().lower() in _YES


@dataclass(frozen=True)
class Forward:
    address: str
    port: int

    def __str__(self) -> str:
        """``ADDR:PORT``, the form recorded for the CLI (IPv4 only: no brackets needed)."""
        return f"{self.address}:{self.port}"

    def hostfwd(self, guest_address: str = "") -> str:
        """The ``-netdev user`` option's value: the host's ADDR:PORT to the guest's port 22 on
        ``guest_address``, the address the guest configures from network_data.json (empty:
        slirp's first DHCP address, which a guest keeps only when it was given that one)."""
        return f"tcp:{self.address}:{self.port}-{guest_address}:{GUEST_PORT}"


def choose_port(
    ports: range,
    *,
    previous: int | None,
    reserved: Collection[int],
    is_free: Callable[[int], bool],
) -> int | None:
    """The port for a guest's forward: its ``previous`` one while that is in range and free (so
    a reboot or stop/start keeps the command that reaches it), else the first free port of
    ``ports`` that no other guest keeps (``reserved``: a stopped guest gets its own back when it
    starts again); None when every port is taken."""
    if previous is not None and previous in ports and is_free(previous):
        return previous
    for port in ports:
        if port != previous and port not in reserved and is_free(port):
            return port
    return None
