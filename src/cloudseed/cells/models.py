"""Which cells exist and which cell holds each instance (API database).

As in Nova, the API database knows every cell's database URL and maps each instance uuid to
its cell, so a request for an instance opens exactly one cell database.
"""

from __future__ import annotations

from sqlalchemy import Boolean, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    ApiBase,
    name_column,
    optional_timestamp,
    timestamp,
    utcnow,
)


class CellMapping(ApiBase):
    __tablename__ = "cell_mappings"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[name_column] = mapped_column(unique=True)
    database_connection: Mapped[str] = mapped_column(Text)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)


class InstanceMapping(ApiBase):
    __tablename__ = "instance_mappings"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(String(36), unique=True)
    cell_id: Mapped[int | None] = mapped_column(ForeignKey("cell_mappings.id"), index=True)
    project_id: Mapped[name_column] = mapped_column(index=True)
    user_id: Mapped[name_column]
    queued_for_delete: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
