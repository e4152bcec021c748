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
from typing import cast

from sqlalchemy import BindParameter, Table, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from cloudseed.db.base import utcnow
from cloudseed.db.in_lists import padded
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
                ConsoleTail.instance_uuid.in_(padded(wanted[start : start + 500]))
            )
        )
        found.update({uuid: stamp for uuid, stamp in rows})
    return found


def store(session: Session, tails: list[tuple[str, bytes, str]]) -> set[str]:
    """Keep each (uuid, output, stamp) (``pack``'s output) as its instance's tail, in the
    caller's transaction; returns the uuids left out, their instances gone (deleted meanwhile:
    nothing is written for them). Four statements built once, whatever the number: a boot
    storm's mirror pass stores a tail for each guest that printed."""
    if not tails:
        return set()
    uuids = [uuid for uuid, _, _ in tails]
    db = session.connection()
    kept = set(db.execute(_HAVE_TAILS, {"uuids": padded(uuids)}).scalars())
    now = utcnow()
    replaced = [
        {"b_uuid": u, "output": o, "stamp": s, "updated_at": now} for u, o, s in tails if u in kept
    ]
    if replaced:
        db.execute(_TAIL_REPLACED, replaced)
    new = [(u, o, s) for u, o, s in tails if u not in kept]
    if not new:
        return set()
    live = set(db.execute(_LIVE, {"uuids": padded([u for u, _, _ in new])}).scalars())
    added = [
        {"instance_uuid": u, "output": o, "stamp": s, "updated_at": now}
        for u, o, s in new
        if u in live
    ]
    if added:
        db.execute(_TAIL_ADDED, added)
    return {u for u, _, _ in new if u not in live}


_TAILS = cast(Table, ConsoleTail.__table__)
_UUIDS: BindParameter[list[str]] = bindparam("uuids", expanding=True)
_HAVE_TAILS = select(_TAILS.c.instance_uuid).where(_TAILS.c.instance_uuid.in_(_UUIDS))
_TAIL_REPLACED = (
    update(_TAILS)
    .where(_TAILS.c.instance_uuid == bindparam("b_uuid"))
    .values(
        output=bindparam("output"), stamp=bindparam("stamp"), updated_at=bindparam("updated_at")
    )
)
_TAIL_ADDED = insert(_TAILS)
_LIVE = select(Instance.uuid).where(Instance.uuid.in_(_UUIDS), Instance.deleted == 0)


def read(session: Session, uuid: str) -> str | None:
    """The instance's stored tail; None when none was stored."""
    stored = session.scalar(select(ConsoleTail.output).where(ConsoleTail.instance_uuid == uuid))
    return None if stored is None else unpack(stored)


def remove(session: Session, uuid: str) -> None:
    session.execute(delete(ConsoleTail).where(ConsoleTail.instance_uuid == uuid))
