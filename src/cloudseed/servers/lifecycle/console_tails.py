"""The console tails compute agents store in the cell database (``ConsoleTail``), so that
``os-getConsoleOutput`` is answered by every API node, not only by one that runs the
instance's host: the agent writes (``agent/console_mirror.py``), any API node reads.

A tail is the last ``TAIL_BYTES`` (100 KiB, what Nova's libvirt driver returns at most) of
what the guest printed, zlib-compressed: a serial console's text shrinks to a tenth or less,
which keeps both the writes of a boot storm and the table small (each guest one row).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.servers.models import ConsoleTail, Instance

TAIL_BYTES = 100 * 1024
LEVEL = 6  # zlib's default: 100 KiB of console text in about a millisecond


def pack(text: str) -> bytes:
    """The stored form of a console's text: its last TAIL_BYTES as UTF-8, compressed."""
    return zlib.compress(text.encode("utf-8", errors="replace")[-TAIL_BYTES:], LEVEL)


def unpack(stored: bytes) -> str:
    # The cut may have split a character at the start: replaced, as the driver's reader does.
    return zlib.decompress(stored).decode("utf-8", errors="replace")


def stamps_of(session: Session, uuids: Iterable[str]) -> dict[str, str]:
    """The stored stamps of these instances' tails (those that have one)."""
    wanted = list(uuids)
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        rows = session.execute(
            select(ConsoleTail.instance_uuid, ConsoleTail.stamp).where(
                ConsoleTail.instance_uuid.in_(wanted[start : start + 500])
            )
        )
        found.update({uuid: stamp for uuid, stamp in rows})
    return found


def store(session: Session, uuid: str, *, output: bytes, stamp: str) -> bool:
    """Keep ``output`` (``pack``'s) as the instance's tail; False when the instance is gone
    (deleted meanwhile: nothing is written)."""
    now = utcnow()
    changed = session.execute(
        update(ConsoleTail)
        .where(ConsoleTail.instance_uuid == uuid)
        .values(output=output, stamp=stamp, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    if changed.rowcount:  # type: ignore[attr-defined]
        return True
    live = session.scalar(select(Instance.id).where(Instance.uuid == uuid, Instance.deleted == 0))
    if live is None:
        return False
    session.add(ConsoleTail(instance_uuid=uuid, output=output, stamp=stamp, updated_at=now))
    session.flush()
    return True


def read(session: Session, uuid: str) -> str | None:
    """The instance's stored tail; None when none was stored."""
    stored = session.scalar(select(ConsoleTail.output).where(ConsoleTail.instance_uuid == uuid))
    return None if stored is None else unpack(stored)


def remove(session: Session, uuid: str) -> None:
    session.execute(delete(ConsoleTail).where(ConsoleTail.instance_uuid == uuid))
