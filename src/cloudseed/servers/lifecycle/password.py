"""The instance password: posted once by the guest (``/openstack/<v>/password``), read and
cleared through the compute API (``os-server-password``).

Stored as Nova does, in up to four 255-character system metadata chunks. "Only once" is the
database's unique constraint, not a cached read (Nova's check can race within its cache
window): two concurrent posts give one 200 and one 409.

The metadata service (``metadata/app.py``) stores it and reads it back through
``system_keys.PASSWORD_CHUNKS``; the compute API reads and clears it. It lives here, with the
instance's other system metadata, so that servers imports nothing of metadata.
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cloudseed.servers import records
from cloudseed.servers.errors import PasswordAlreadySet, PasswordTooLarge
from cloudseed.servers.models import InstanceSystemMetadata
from cloudseed.servers.system_metadata import PASSWORD_CHUNK_SIZE as CHUNK
from cloudseed.servers.system_metadata import PASSWORD_CHUNKS
from cloudseed.servers.system_metadata import PASSWORD_MAX_SIZE as MAX_SIZE

__all__ = ["CHUNK", "MAX_SIZE", "PASSWORD_CHUNKS", "clear", "read", "store"]


def store(session: Session, uuid: str, password: str) -> None:
    if len(password.encode()) > MAX_SIZE or len(password) > MAX_SIZE:
        raise PasswordTooLarge()
    records.load(session, uuid)  # 404 for a deleted instance
    for index, key in enumerate(PASSWORD_CHUNKS):
        session.add(
            InstanceSystemMetadata(
                instance_uuid=uuid, key=key, value=password[index * CHUNK : (index + 1) * CHUNK]
            )
        )
    try:
        session.flush()
    except IntegrityError as exc:
        raise PasswordAlreadySet() from exc
    records.guest_changed(session, uuid)


def clear(session: Session, uuid: str) -> None:
    records.load(session, uuid)
    session.execute(
        delete(InstanceSystemMetadata).where(
            InstanceSystemMetadata.instance_uuid == uuid,
            InstanceSystemMetadata.key.in_(PASSWORD_CHUNKS),
        )
    )
    records.guest_changed(session, uuid)


def read(session: Session, uuid: str) -> str:
    record = records.load(session, uuid)
    return "".join(record.system_metadata.get(k, "") for k in PASSWORD_CHUNKS)
