"""Quota limits: the ``[quota]`` default unless the API database overrides it for the project,
or for the user within the project (the user row wins)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.quotas.models import ProjectQuota, ProjectUserQuota

UNLIMITED = -1


def limit_for(
    session: Session, *, resource: str, project_id: str, user_id: str, default: int
) -> int:
    user_limit = session.scalar(
        select(ProjectUserQuota.hard_limit).where(
            ProjectUserQuota.resource == resource,
            ProjectUserQuota.project_id == project_id,
            ProjectUserQuota.user_id == user_id,
        )
    )
    if user_limit is not None:
        return user_limit
    project_limit = session.scalar(
        select(ProjectQuota.hard_limit).where(
            ProjectQuota.resource == resource, ProjectQuota.project_id == project_id
        )
    )
    return project_limit if project_limit is not None else default


def within(limit: int, count: int) -> bool:
    """True when ``count`` items fit under ``limit``."""
    return limit == UNLIMITED or count <= limit
