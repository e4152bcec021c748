"""Host key reports (a cell database): what each guest said its SSH host keys are, per boot
generation.

A boot generation is one life of the guest's disk: it starts when a build or rebuild succeeds,
which is when the compute agent sets ``instances.launched_at``, so ``launched_at`` names it.
Reboots, stop and start keep the disk, its host keys and cloud-init's once-per-instance state,
so they do not start a generation (``hostkeys/__init__.py`` says why that matters).

``role`` gives a report its standing, and the unique constraint on (instance, generation,
source, role) decides it among concurrent writers: ``accepted``, the one report of that source
that counts; ``baseline``, the console block that was already there when the generation began
(so a block printed by the previous disk is never taken for the new one); NULL, a repeat,
kept but never shown. NULLs never collide, so repeats are bounded by the service instead.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import MYSQL_TABLE_ARGS, CellBase, LongText, timestamp, utcnow
from cloudseed.servers import models as _servers  # noqa: F401 (instances, the foreign key's table)

PHONE_HOME = "phone_home"
CONSOLE = "console"
SOURCES = (PHONE_HOME, CONSOLE)
ACCEPTED = "accepted"
BASELINE = "baseline"


class HostKeyReport(CellBase):
    __tablename__ = "host_key_reports"
    __table_args__ = (
        UniqueConstraint("instance_uuid", "launched_at", "source", "role"),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    # The boot generation the report belongs to: the instance's launched_at when it came.
    launched_at: Mapped[timestamp]
    source: Mapped[str] = mapped_column(String(16))  # phone_home | console
    role: Mapped[str | None] = mapped_column(String(16), default=None)  # accepted | baseline
    # As the guest reported them (phone_home only; checked, at most 255 characters).
    hostname: Mapped[str | None] = mapped_column(String(255), default=None)
    fqdn: Mapped[str | None] = mapped_column(String(255), default=None)
    # JSON list of {"type", "key", "fingerprint_sha256"}, in the order reported.
    keys: Mapped[str] = mapped_column(LongText)
    recorded_at: Mapped[timestamp] = mapped_column(default=utcnow)
