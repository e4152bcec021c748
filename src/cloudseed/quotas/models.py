"""Quota overrides (API database). Defaults come from ``[quota]`` settings; a row here replaces
the default for one project, or for one user within a project (Nova's ``quotas`` and
``project_user_quotas``)."""

from __future__ import annotations

from sqlalchemy import Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import MYSQL_TABLE_ARGS, ApiBase, name_column, timestamp, utcnow


class ProjectQuota(ApiBase):
    __tablename__ = "quotas"
    __table_args__ = (UniqueConstraint("project_id", "resource"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[name_column]
    resource: Mapped[str] = mapped_column(String(255))
    hard_limit: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)


class ProjectUserQuota(ApiBase):
    __tablename__ = "project_user_quotas"
    __table_args__ = (UniqueConstraint("user_id", "project_id", "resource"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[name_column]
    user_id: Mapped[name_column]
    resource: Mapped[str] = mapped_column(String(255))
    hard_limit: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
