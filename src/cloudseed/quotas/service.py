"""Quota limits and the instance quota check.

Limits: the ``[quota]`` default unless the API database overrides it for the project, or for
the user within the project (the user row wins; a user without a row has the project's limit),
as Nova's DbQuotaDriver. ``-1`` is unlimited.

This package is below servers and cells (docs/architecture.md), so it never counts instances
itself: the caller hands in the usages (``servers/quota.py`` counts them in the cells).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, String, bindparam, delete, func, select
from sqlalchemy.orm import Session

from cloudseed.quotas.errors import InvalidQuotaLimit, TooManyInstances
from cloudseed.quotas.models import ProjectQuota, ProjectUserQuota
from cloudseed.settings import QuotaSection

UNLIMITED = -1

# Nova's resources in its order (nova/quota.py), with the defaults of the ones cloudseed does
# not configure: Nova's option defaults (metadata_items, server_groups, server_group_members)
# and -1 for the network resources Nova dropped (shown below 2.36 only).
INSTANCE_RESOURCES = ("instances", "cores", "ram")
NETWORK_RESOURCES = ("fixed_ips", "floating_ips", "security_groups", "security_group_rules")
PERSONALITY_RESOURCES = (
    "injected_files",
    "injected_file_content_bytes",
    "injected_file_path_bytes",
)
RESOURCES = (
    *INSTANCE_RESOURCES,
    "metadata_items",
    "injected_files",
    "injected_file_content_bytes",
    "injected_file_path_bytes",
    "key_pairs",
    "server_groups",
    "server_group_members",
    *NETWORK_RESOURCES,
)
FIXED_DEFAULTS = {
    "metadata_items": 128,
    "server_groups": 10,
    "server_group_members": 10,
    **dict.fromkeys(NETWORK_RESOURCES, UNLIMITED),
}


def defaults(quota: QuotaSection) -> dict[str, int]:
    """Every resource's default limit."""
    configured = {
        "instances": quota.instances,
        "cores": quota.cores,
        "ram": quota.ram,
        "key_pairs": quota.key_pairs,
        "injected_files": quota.injected_files,
        "injected_file_content_bytes": quota.injected_file_content_bytes,
        "injected_file_path_bytes": quota.injected_file_path_length,
    }
    values = {**FIXED_DEFAULTS, **configured}
    return {resource: values[resource] for resource in RESOURCES}


# The bound parameters of ``limit_expression``: the caller passes them with the statement.
PROJECT_PARAM, USER_PARAM, DEFAULT_PARAM = "quota_project_id", "quota_user_id", "quota_default"


def limit_expression(resource: str) -> ColumnElement[int]:
    """``limit_for`` as one SQL expression, to put in a statement built once: the user's row,
    else the project's, else the default, read from the bound parameters ``PROJECT_PARAM``,
    ``USER_PARAM`` and ``DEFAULT_PARAM``. (``hard_limit`` is never NULL, so COALESCE falls
    through only where a row is missing.)"""
    project = bindparam(PROJECT_PARAM, type_=String)
    user_row = (
        select(ProjectUserQuota.hard_limit)
        .where(
            ProjectUserQuota.resource == resource,
            ProjectUserQuota.project_id == project,
            ProjectUserQuota.user_id == bindparam(USER_PARAM, type_=String),
        )
        .scalar_subquery()
    )
    project_row = (
        select(ProjectQuota.hard_limit)
        .where(ProjectQuota.resource == resource, ProjectQuota.project_id == project)
        .scalar_subquery()
    )
    return func.coalesce(user_row, project_row, bindparam(DEFAULT_PARAM, type_=Integer))


def limit_params(*, project_id: str, user_id: str, default: int) -> dict[str, Any]:
    """The values of ``limit_expression``'s parameters."""
    return {PROJECT_PARAM: project_id, USER_PARAM: user_id, DEFAULT_PARAM: default}


# One statement per resource, built when first asked for: building a select costs more than
# SQLite takes to run it.
_LIMIT_STATEMENTS: dict[str, Select[int]] = {}


def limit_for(
    session: Session, *, resource: str, project_id: str, user_id: str, default: int
) -> int:
    statement = _LIMIT_STATEMENTS.get(resource)
    if statement is None:
        statement = _LIMIT_STATEMENTS[resource] = select(limit_expression(resource))
    params = limit_params(project_id=project_id, user_id=user_id, default=default)
    return int(session.execute(statement, params).scalar_one())


def metadata_items_limit(session: Session, *, project_id: str, user_id: str) -> int:
    """The ``metadata_items`` limit (Nova's default: cloudseed has no option for it)."""
    return limit_for(
        session,
        resource="metadata_items",
        project_id=project_id,
        user_id=user_id,
        default=FIXED_DEFAULTS["metadata_items"],
    )


def within(limit: int, count: int) -> bool:
    """True when ``count`` items fit under ``limit``."""
    return limit == UNLIMITED or count <= limit


def project_overrides(session: Session, project_id: str) -> dict[str, int]:
    rows = session.execute(
        select(ProjectQuota.resource, ProjectQuota.hard_limit).where(
            ProjectQuota.project_id == project_id
        )
    )
    return {resource: limit for resource, limit in rows}


def user_overrides(session: Session, project_id: str, user_id: str) -> dict[str, int]:
    rows = session.execute(
        select(ProjectUserQuota.resource, ProjectUserQuota.hard_limit).where(
            ProjectUserQuota.project_id == project_id, ProjectUserQuota.user_id == user_id
        )
    )
    return {resource: limit for resource, limit in rows}


def limits(
    session: Session, quota: QuotaSection, *, project_id: str, user_id: str | None = None
) -> dict[str, int]:
    """Every resource's limit for the project, or for the user within it."""
    values = {**defaults(quota), **project_overrides(session, project_id)}
    if user_id is not None:
        values.update(user_overrides(session, project_id, user_id))
    return values


def _sum(a: int, b: int) -> int:
    return UNLIMITED if UNLIMITED in (a, b) else a + b


def _sub(a: int, b: int) -> int:
    return UNLIMITED if UNLIMITED in (a, b) else a - b


def _below(a: int, b: int) -> bool:
    """a < b with -1 as infinity."""
    inf = float("inf")
    return (inf if a == UNLIMITED else a) < (inf if b == UNLIMITED else b)


def set_limits(
    session: Session,
    quota: QuotaSection,
    values: Mapping[str, int],
    *,
    project_id: str,
    user_id: str | None,
    usages: Mapping[str, int],
    force: bool,
) -> None:
    """Nova's PUT: every value is checked first (unless ``force``), then all are written.

    A project's limit must be at least its usage and the sum of its users' limits; a user's at
    least the user's usage and at most what the project has left for users (the project limit
    less every user limit in it, plus this user's own)."""
    if not force:
        project = {**defaults(quota), **project_overrides(session, project_id)}
        remains = dict(project)
        rows = session.execute(
            select(ProjectUserQuota.resource, func.sum(ProjectUserQuota.hard_limit))
            .where(ProjectUserQuota.project_id == project_id)
            .group_by(ProjectUserQuota.resource)
        )
        for resource, total in rows:
            if resource in remains:
                remains[resource] = _sub(remains[resource], int(total))
        own = user_overrides(session, project_id, user_id) if user_id is not None else {}
        for resource, value in values.items():
            in_use = usages.get(resource, 0)
            if user_id is not None:
                minimum = in_use
                maximum = _sum(remains[resource], own.get(resource, 0))
            else:
                minimum = max(_sub(project[resource], remains[resource]), in_use)
                maximum = UNLIMITED
            if _below(value, minimum):
                raise InvalidQuotaLimit(
                    f"Quota limit {value} for {resource} must be greater than or equal to "
                    f"already used and reserved {minimum}."
                )
            if _below(maximum, value):
                raise InvalidQuotaLimit(
                    f"Quota limit {value} for {resource} must be less than or equal to {maximum}."
                )
    for resource, value in values.items():
        row: ProjectQuota | ProjectUserQuota | None
        if user_id is None:
            row = session.scalar(
                select(ProjectQuota).where(
                    ProjectQuota.project_id == project_id, ProjectQuota.resource == resource
                )
            )
            if row is None:
                session.add(
                    ProjectQuota(project_id=project_id, resource=resource, hard_limit=value)
                )
        else:
            row = session.scalar(
                select(ProjectUserQuota).where(
                    ProjectUserQuota.project_id == project_id,
                    ProjectUserQuota.user_id == user_id,
                    ProjectUserQuota.resource == resource,
                )
            )
            if row is None:
                session.add(
                    ProjectUserQuota(
                        project_id=project_id, user_id=user_id, resource=resource, hard_limit=value
                    )
                )
        if row is not None:
            row.hard_limit = value
    session.flush()


def delete_limits(session: Session, *, project_id: str, user_id: str | None) -> None:
    """Back to the defaults: a project's DELETE removes its users' rows too, as Nova's
    ``destroy_all_by_project``."""
    if user_id is None:
        session.execute(delete(ProjectQuota).where(ProjectQuota.project_id == project_id))
        session.execute(delete(ProjectUserQuota).where(ProjectUserQuota.project_id == project_id))
    else:
        session.execute(
            delete(ProjectUserQuota).where(
                ProjectUserQuota.project_id == project_id, ProjectUserQuota.user_id == user_id
            )
        )


@dataclass(frozen=True)
class InstanceLimits:
    """The instance limits a create is checked against: the project's, and the user's when
    the user has an override of instances, cores or ram (Nova counts per user only then)."""

    project: Mapping[str, int]
    user: Mapping[str, int] | None
    # The user's own overrides of any resource (``user`` holds them only for the above).
    user_own: Mapping[str, int] = field(default_factory=dict)

    def limit_of(self, resource: str) -> int:
        """``resource``'s limit for the user: theirs, else the project's, else the default
        (what ``limit_for`` reads in one statement)."""
        return self.user_own.get(resource, self.project[resource])

    @property
    def unlimited(self) -> bool:
        """No limit on instances, cores or RAM: no create can be refused, so none needs the
        usage counted (a count reads every live instance of the project)."""
        return all(
            limits_.get(resource, UNLIMITED) == UNLIMITED
            for limits_ in (self.project, self.user or {})
            for resource in INSTANCE_RESOURCES
        )


def instance_limits(
    session: Session, quota: QuotaSection, *, project_id: str, user_id: str
) -> InstanceLimits:
    project = limits(session, quota, project_id=project_id)
    own = user_overrides(session, project_id, user_id)
    if not any(r in own for r in INSTANCE_RESOURCES):
        return InstanceLimits(project=project, user=None, user_own=own)
    return InstanceLimits(project=project, user={**project, **own}, user_own=own)


@dataclass(frozen=True)
class Usage:
    instances: int = 0
    cores: int = 0
    ram: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"instances": self.instances, "cores": self.cores, "ram": self.ram}


def allowed_instances(
    limits_: InstanceLimits,
    *,
    project_usage: Usage,
    user_usage: Usage | None,
    vcpus: int,
    memory_mb: int,
    min_count: int,
    max_count: int,
) -> int:
    """Nova's ``check_num_instances_quota``: ``max_count`` when it fits, else the most that
    fit when that is at least ``min_count``; otherwise ``TooManyInstances`` (403)."""
    while True:
        deltas = {"instances": max_count, "cores": max_count * vcpus, "ram": max_count * memory_mb}
        over = _over(limits_, project_usage, user_usage, deltas)
        if over is None:
            return max_count
        quotas, usage, overs = over
        used = usage.as_dict()
        allowed = max_count
        for resource, per in (("instances", 1), ("cores", vcpus), ("ram", memory_mb)):
            if quotas[resource] != UNLIMITED and per:
                allowed = min(allowed, (quotas[resource] - used[resource]) // per)
        if 0 < allowed < max_count and min_count <= allowed:
            max_count = allowed
            continue
        requested = {
            "instances": str(min_count) if min_count == max_count else f"{min_count}-{max_count}",
            "cores": str(max_count * vcpus),
            "ram": str(max_count * memory_mb),
        }
        raise TooManyInstances(
            overs=overs,
            requested=[requested[r] for r in overs],
            used=[str(used[r]) for r in overs],
            allowed=[str(quotas[r]) for r in overs],
        )


def recheck_instances(
    limits_: InstanceLimits,
    *,
    project_usage: Usage,
    user_usage: Usage | None,
    vcpus: int,
    memory_mb: int,
    requested: int,
) -> None:
    """After the insert (usages include the new instances): over any limit -> 403, with the
    request's numbers, as Nova's recheck."""
    over = _over(limits_, project_usage, user_usage, dict.fromkeys(INSTANCE_RESOURCES, 0))
    if over is None:
        return
    quotas, usage, overs = over
    asked = {
        "instances": requested,
        "cores": requested * vcpus,
        "ram": requested * memory_mb,
    }
    used = usage.as_dict()
    raise TooManyInstances(
        overs=overs,
        requested=[str(asked[r]) for r in overs],
        used=[str(used[r]) for r in overs],
        allowed=[str(quotas[r]) for r in overs],
    )


def _over(
    limits_: InstanceLimits,
    project_usage: Usage,
    user_usage: Usage | None,
    deltas: Mapping[str, int],
) -> tuple[Mapping[str, int], Usage, list[str]] | None:
    """(the limits passed, their usage, the resources over) or None: the project's limits
    first, then the user's, as Nova's ``limit_check_project_and_user``."""
    scopes: list[tuple[Mapping[str, int], Usage]] = [(limits_.project, project_usage)]
    if limits_.user is not None and user_usage is not None:
        scopes.append((limits_.user, user_usage))
    for quotas, usage in scopes:
        used = usage.as_dict()
        # Sorted, as Nova's OverQuota names them.
        overs = sorted(
            r
            for r in INSTANCE_RESOURCES
            if quotas[r] != UNLIMITED and quotas[r] < used[r] + deltas[r]
        )
        if overs:
            return quotas, usage, overs
    return None
