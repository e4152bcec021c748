"""What ``cloudseed known-hosts SERVER`` prints: the server's host keys under every name a
client reaches it by.

The names are the server's fixed addresses (port 22) and, when its host recorded an SSH forward
(``cloudseed server ssh``, system metadata ``ssh_forward``), ``[ADDRESS]:PORT``, which is how
ssh looks up ``ssh -p PORT USER@ADDRESS``. Read from the databases, so it works on any node
that has them, as ``cloudseed server ssh`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cloudseed.cells.service import CellDatabases
from cloudseed.hostkeys import known_hosts, service
from cloudseed.hostkeys.errors import NoHostKeys
from cloudseed.servers.lifecycle.ssh_access import find_server
from cloudseed.servers.system_metadata import SSH_FORWARD


@dataclass(frozen=True)
class KnownHosts:
    uuid: str
    hosts: tuple[str, ...]
    keys: tuple[service.ShownKey, ...]

    def lines(self) -> list[str]:
        return known_hosts.lines(self.hosts, (shown.key for shown in self.keys))


def known_hosts_of(cells: CellDatabases, ref: str, *, more: Iterable[str] = ()) -> KnownHosts:
    """The host keys of server ``ref`` (a uuid or a unique name) and its names, plus ``more``
    names the caller knows it by; NoHostKeys when none are recorded yet."""
    record = find_server(cells, ref)
    uuid = record.instance.uuid
    with cells.for_instance(uuid).read() as session:
        shown = service.host_keys(session, uuid)
    if not shown:
        raise NoHostKeys(uuid)
    hosts = [ip.address for _port, ips in record.ports for ip in ips]
    forward = record.system_metadata.get(SSH_FORWARD)
    pattern = known_hosts.forward_pattern(forward) if forward else None
    if pattern is not None:
        hosts.append(pattern)
    hosts.extend(more)
    return KnownHosts(uuid=uuid, hosts=tuple(dict.fromkeys(hosts)), keys=tuple(shown))
