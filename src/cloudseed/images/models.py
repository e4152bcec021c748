"""Images (API database): the registry of disk images servers boot from.

Two ways in: the operator's ``cloudseed image add`` (a file copied into the store at once:
active, public, no owner) and the Glance slice's ``POST /v2/images`` then ``PUT .../file`` (a
project's image: queued without data, active once uploaded). ``path``, ``size`` and the
checksums are None until the image has data.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    ApiBase,
    NameType,
    optional_timestamp,
    timestamp,
    utcnow,
)
from cloudseed.images.formats import ACTIVE


class Image(ApiBase):
    __tablename__ = "images"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    # Glance allows an image without a name (null).
    name: Mapped[str | None] = mapped_column(NameType, index=True)
    disk_format: Mapped[str | None] = mapped_column(String(32))
    container_format: Mapped[str | None] = mapped_column(String(32))
    path: Mapped[str | None] = mapped_column(Text)
    size: Mapped[int | None] = mapped_column(BigInteger)
    # The disk the image gives a guest (qcow2: from its header; raw: the file's size). None on
    # images registered before it was recorded.
    virtual_size: Mapped[int | None] = mapped_column(BigInteger, default=None)
    checksum_sha256: Mapped[str | None] = mapped_column(String(64))
    # Glance's ``checksum``; None on images registered before it was recorded.
    checksum_md5: Mapped[str | None] = mapped_column(String(32), default=None)
    min_disk: Mapped[int] = mapped_column(Integer, default=0)
    min_ram: Mapped[int] = mapped_column(Integer, default=0)
    # JSON object of image properties, e.g. {"img_config_drive": "mandatory"}.
    properties: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(32), default=ACTIVE)
    # The project that owns the image; None for the operator's (``cloudseed image add``).
    owner: Mapped[str | None] = mapped_column(NameType, index=True, default=None)
    visibility: Mapped[str] = mapped_column(String(16), default="public", server_default="public")
    protected: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    os_hidden: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # JSON list of tags; None on images registered before tags were recorded (none).
    tags: Mapped[str | None] = mapped_column(Text, default="[]")
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
