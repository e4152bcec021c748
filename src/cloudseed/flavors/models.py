"""Flavors (API database): the sizes servers are created with, managed by operators."""

from __future__ import annotations

from sqlalchemy import Boolean, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import MYSQL_TABLE_ARGS, ApiBase, name_column, timestamp, utcnow


class Flavor(ApiBase):
    __tablename__ = "flavors"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    flavorid: Mapped[name_column] = mapped_column(unique=True)
    name: Mapped[name_column] = mapped_column(unique=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    root_gb: Mapped[int] = mapped_column(Integer)
    ephemeral_gb: Mapped[int] = mapped_column(Integer, default=0)
    swap: Mapped[int] = mapped_column(Integer, default=0)
    is_public: Mapped[bool] = mapped_column(Boolean, default=True)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
