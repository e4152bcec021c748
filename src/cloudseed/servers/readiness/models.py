"""The events of a server's latest reported boot (a cell database): what cloud-init's webhook
posted, in the order it came, at most ``store.MAX_EVENTS`` per server. The boot's status is
kept apart, in the server's system metadata (``progress.py``), so that the server view reads it
with the record and no query of its own."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import MYSQL_TABLE_ARGS, CellBase, name_column, timestamp, utcnow
from cloudseed.servers import models as _servers  # noqa: F401 (instances, the foreign key's table)


class BootReportEvent(CellBase):
    __tablename__ = "boot_events"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    # The boot the event belongs to: the generation (launched_at, as progress.py writes it)
    # and the boot within it.
    generation: Mapped[str] = mapped_column(String(32))
    boot: Mapped[int] = mapped_column(Integer)
    # Compared byte-wise (a repeat is the same name, type and guest time), as names are.
    name: Mapped[name_column]
    event_type: Mapped[str] = mapped_column(String(8))
    result: Mapped[str | None] = mapped_column(String(8), default=None)
    origin: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text)
    guest_time: Mapped[timestamp]  # the event's timestamp, by the guest's clock
    received_at: Mapped[timestamp] = mapped_column(default=utcnow)
