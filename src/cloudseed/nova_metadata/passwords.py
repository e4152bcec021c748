"""The password a guest posts (``POST /openstack/<v>/password``), written as Nova's metadata
API writes it (nova/api/metadata/password.py): into the instance's cell, as the system
metadata items ``password_0`` to ``password_3`` (255 characters each, all four written, empty
ones too), with the instance's ``updated_at`` moved as Nova's ``Instance.save()`` moves it
(which also tells every other worker within a poll, changes.py).

A password is posted once: Nova answers 409 when the instance has one (the caller checks), and
400 "Request is too large." above 1020 bytes. A database that refuses the write (a read-only
user) is the caller's to answer as Nova does.
"""

from __future__ import annotations

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from cloudseed.errors import InvalidInput
from cloudseed.nova_metadata import schema
from cloudseed.nova_metadata.databases import NovaDatabases
from cloudseed.nova_metadata.loading import Loader
from cloudseed.servers.errors import PasswordTooLarge
from cloudseed.types import Receive

__all__ = ["PasswordTooLarge", "read_password", "store_password"]

CHUNKS = 4
CHUNK_LENGTH = 255
MAX_SIZE = CHUNKS * CHUNK_LENGTH


async def read_password(receive: Receive, headers: list[tuple[bytes, bytes]]) -> str:
    """The posted password (400 over MAX_SIZE bytes, as Nova; not valid UTF-8, too)."""
    for name, value in headers:
        if name == b"content-length" and value.isdigit() and int(value) > MAX_SIZE:
            raise PasswordTooLarge()
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_SIZE:
            raise PasswordTooLarge()
        if not message.get("more_body"):
            break
    try:
        text: str = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("The password is not valid UTF-8.") from None
    return text


def store_password(databases: NovaDatabases, uuid: str, password: str, *, local: bool) -> None:
    """Write ``password`` into instance ``uuid``'s cell (an instance gone since the caller
    loaded it is a 400, as Nova's InstanceNotFound there)."""
    loader = Loader(databases, local=local, resolve=lambda _address: None)
    placed = loader.databases_of([uuid])
    if not placed:
        raise InvalidInput(f"Instance {uuid} could not be found.")
    db = placed[0][0]
    db.run(lambda session: _write(session, uuid, password), write=True, attempts=1)


def _write(session: Session, uuid: str, password: str) -> None:
    instances, sysmeta = schema.instances, schema.instance_system_metadata
    moved = session.execute(  # type: ignore[attr-defined]
        update(instances)
        .where(instances.c.uuid == uuid, instances.c.deleted == 0)
        .values(updated_at=schema.utcnow())
    ).rowcount
    if not moved:
        raise InvalidInput(f"Instance {uuid} could not be found.")
    chunks = {
        f"password_{i}": password[i * CHUNK_LENGTH : (i + 1) * CHUNK_LENGTH] for i in range(CHUNKS)
    }
    existing = dict(
        session.execute(
            select(sysmeta.c.key, sysmeta.c.id).where(
                sysmeta.c.instance_uuid == uuid, sysmeta.c.key.in_(list(chunks))
            )
        ).all()
    )
    for key, value in chunks.items():
        if key in existing:
            session.execute(
                update(sysmeta).where(sysmeta.c.id == existing[key]).values(value=value)
            )
        else:
            session.execute(
                insert(sysmeta).values(instance_uuid=uuid, key=key, value=value, deleted=0)
            )
