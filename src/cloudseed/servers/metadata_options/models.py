"""The tables of per-server metadata options (2.109): a project's defaults (API database) and
the token-less access audit (cell databases). A server's own options are in its system
metadata (``options.SYSTEM_METADATA_KEY``), read with the rest of its record."""

from __future__ import annotations

from sqlalchemy import BigInteger, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    ApiBase,
    CellBase,
    name_column,
    optional_timestamp,
    timestamp,
    utcnow,
)


class ProjectMetadataOptions(ApiBase):
    """The metadata options a project's new servers get where their create leaves a field
    unset (``options`` as a server stores them: JSON of the set fields)."""

    __tablename__ = "project_metadata_options"
    __table_args__ = MYSQL_TABLE_ARGS

    project_id: Mapped[name_column] = mapped_column(primary_key=True)
    options: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[timestamp] = mapped_column(default=utcnow)


class MetadataAccess(CellBase):
    """What one server's guest asked the metadata service without a session token: every such
    request, and among them the reads of its user data and of its password, each counted with
    the time of the latest. Written by the metadata workers in batches (metadata/access_audit.py),
    so up to one flush interval behind. No foreign key: the counts of a deleted server stay
    until its row is purged with the rest."""

    __tablename__ = "metadata_access"
    __table_args__ = MYSQL_TABLE_ARGS

    instance_uuid: Mapped[str] = mapped_column(String(36), primary_key=True)
    project_id: Mapped[name_column] = mapped_column(index=True)
    tokenless_count: Mapped[int] = mapped_column(BigInteger, default=0)
    tokenless_last_at: Mapped[optional_timestamp] = mapped_column(default=None)
    user_data_count: Mapped[int] = mapped_column(BigInteger, default=0)
    user_data_last_at: Mapped[optional_timestamp] = mapped_column(default=None)
    password_count: Mapped[int] = mapped_column(BigInteger, default=0)
    password_last_at: Mapped[optional_timestamp] = mapped_column(default=None)
