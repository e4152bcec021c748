"""Images (API database): a minimal registry of disk images servers boot from."""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    ApiBase,
    name_column,
    optional_timestamp,
    timestamp,
    utcnow,
)

DISK_FORMATS = ("raw", "qcow2")


class Image(ApiBase):
    __tablename__ = "images"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[name_column] = mapped_column(index=True)
    disk_format: Mapped[str] = mapped_column(String(32))
    container_format: Mapped[str] = mapped_column(String(32), default="bare")
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    # The disk the image gives a guest (qcow2: from its header; raw: the file's size). None on
    # images registered before it was recorded.
    virtual_size: Mapped[int | None] = mapped_column(BigInteger, default=None)
    checksum_sha256: Mapped[str] = mapped_column(String(64))
    min_disk: Mapped[int] = mapped_column(Integer, default=0)
    min_ram: Mapped[int] = mapped_column(Integer, default=0)
    # JSON object of image properties, e.g. {"img_config_drive": "mandatory"}.
    properties: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(32), default="active")
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
