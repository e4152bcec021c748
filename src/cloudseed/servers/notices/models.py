"""The table of acknowledged lifecycle notices (2.111): the notice a project's servers get when
a request names none (API database). A server's events are in its system metadata
(``rules.SYSTEM_METADATA_KEY``), an operation's notice in its row (``servers.models.Operation``)."""

from __future__ import annotations

from sqlalchemy import Text
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import MYSQL_TABLE_ARGS, ApiBase, name_column, timestamp, utcnow


class ProjectNoticeDefaults(ApiBase):
    """Seconds of notice per event type (JSON ``{"reboot": 300, ...}``, only the types that
    have one)."""

    __tablename__ = "project_notice_defaults"
    __table_args__ = MYSQL_TABLE_ARGS

    project_id: Mapped[name_column] = mapped_column(primary_key=True)
    notices: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[timestamp] = mapped_column(default=utcnow)
