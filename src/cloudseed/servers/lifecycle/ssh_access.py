"""How to SSH into a server: the forward its host's agent recorded (system metadata
``ssh_forward``, ``servers/system_metadata.py``) and the login user of its image.

Read by ``cloudseed server ssh`` on any node: the record is in the cell database, so the node
that runs the guest need not be the one asking. The user is the image's ``os_admin_user``
(Glance's standard property for the image's administrator account), as the image is
registered now, or as it was when the server was created (its system metadata keeps the
image's properties then), else ``root``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from sqlalchemy import select

from cloudseed.cells.errors import InstanceNotFound
from cloudseed.cells.service import CellDatabases
from cloudseed.compute import ssh_forward
from cloudseed.images import service as images
from cloudseed.images.errors import ImageNotFound
from cloudseed.servers import records, states
from cloudseed.servers.errors import NoSshForward, ServerNameNotUnique
from cloudseed.servers.models import Instance
from cloudseed.servers.system_metadata import SSH_FORWARD

ADMIN_USER_PROPERTY = "os_admin_user"
DEFAULT_USER = "root"


@dataclass(frozen=True)
class SshAccess:
    user: str
    address: str
    port: int

    def command(self) -> str:
        """``ssh -p PORT USER@ADDRESS``, quoted for a shell (an odd image property must not
        turn into more of a command line)."""
        return f"ssh -p {self.port} {shlex.quote(f'{self.user}@{self.address}')}"


def find_server(cells: CellDatabases, ref: str) -> records.ServerRecord:
    """The live server whose uuid is ``ref``, else the one named ``ref`` (in any project and
    cell); InstanceNotFound, or ServerNameNotUnique when several have the name."""
    try:
        cell = cells.for_instance(ref)
    except InstanceNotFound:
        pass
    else:
        with cell.read() as session:
            return records.load(session, ref)
    found: list[records.ServerRecord] = []
    for cell in cells.all_cells():
        with cell.read() as session:
            named = list(
                session.scalars(
                    select(Instance).where(Instance.display_name == ref, Instance.deleted == 0)
                )
            )
            found += records.load_many(session, named) if named else []
    if not found:
        raise InstanceNotFound(ref)
    if len(found) > 1:
        raise ServerNameNotUnique(ref, [r.instance.uuid for r in found])
    return found[0]


def ssh_access(cells: CellDatabases, ref: str) -> SshAccess:
    """How to reach server ``ref``'s port 22; NoSshForward says why there is no way."""
    record = find_server(cells, ref)
    uuid = record.instance.uuid
    if not ssh_forward.wanted(record.metadata):
        raise NoSshForward(
            uuid,
            f"it did not opt in (server metadata {ssh_forward.METADATA_KEY}=true, "
            "then start or reboot it)",
        )
    if record.instance.vm_state != states.ACTIVE:
        raise NoSshForward(uuid, f"it is not running (vm_state {record.instance.vm_state})")
    recorded = record.system_metadata.get(SSH_FORWARD)
    if not recorded:
        raise NoSshForward(
            uuid, "its host has none (a driver without forwards, or not started since opting in)"
        )
    address, _, port = recorded.rpartition(":")
    return SshAccess(user=_admin_user(cells, record), address=address, port=int(port))


def _admin_user(cells: CellDatabases, record: records.ServerRecord) -> str:
    return image_admin_user(cells, record) or DEFAULT_USER


def image_admin_user(cells: CellDatabases, record: records.ServerRecord) -> str | None:
    """The image's ``os_admin_user`` as registered now, else as it was at create; None when
    it has none (the compute agent's key pushes use the same account,
    ``agent/key_operations.py``)."""
    with cells.api_db.read() as session:
        try:
            image = images.get_image(session, record.instance.image_ref)
        except ImageNotFound:
            user = None
        else:
            user = images.properties_of(image).get(ADMIN_USER_PROPERTY)
    return user or record.system_metadata.get(f"image_{ADMIN_USER_PROPERTY}") or None
