"""Scheduler hints: ``os:scheduler_hints`` (or the legacy ``OS-SCH-HNT:scheduler_hints``) beside
``server`` in a create body. Checked with Nova's schema, kept in the instance's system metadata
in the form Nova's request spec keeps them (every value a list of strings) and shown as
``scheduler_hints`` from 2.100. The schema is ``schemas.SCHEDULER_HINTS``.

What they do: ``same_host`` and ``different_host`` narrow the hosts (``hosts/scheduler.py``, as
Nova's SameHostFilter and DifferentHostFilter); ``group`` names a server group, which cloudseed
does not have, so it is Nova's 400 for an unknown group. The others (``query``,
``target_cell``, ``different_cell``, ``build_near_host_ip``, ``cidr`` and any unknown hint,
which Nova's schema lets through) are kept and shown and place nothing, as in a Nova whose
filters for them are not enabled (its default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.db.in_lists import padded
from cloudseed.servers.errors import InstanceGroupNotFound
from cloudseed.servers.models import Instance

# The system metadata key; its value is the stored hints as a JSON object.
SCHEDULER_HINTS = "scheduler_hints"
KEYS = ("os:scheduler_hints", "OS-SCH-HNT:scheduler_hints")  # the first one present wins


def from_body(body: Mapping[str, Any]) -> dict[str, list[str]]:
    """The request's hints as they are kept: Nova's ``RequestSpec._from_hints`` makes every
    value a list, and its string field makes each item ``str(item)``."""
    hints: Mapping[str, Any] = next((body[k] for k in KEYS if k in body), {})
    if hints.get("group"):
        group = hints["group"]
        raise InstanceGroupNotFound(group[0] if isinstance(group, list) else group)
    return {
        name: [item if isinstance(item, str) else str(item) for item in _as_list(value)]
        for name, value in hints.items()
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def dumps(hints: dict[str, list[str]]) -> str:
    return json.dumps(hints, sort_keys=True)


def shown(system_metadata: Mapping[str, str]) -> dict[str, list[str]]:
    """The hints a server was created with ({} for none)."""
    value: dict[str, list[str]] = json.loads(system_metadata.get(SCHEDULER_HINTS) or "{}")
    return value


def hosts_of(session: Session, hints: dict[str, list[str]], name: str) -> frozenset[str] | None:
    """The hosts of the live, placed instances the hint ``name`` names, in the cell the new
    servers go to (any project's, as Nova's filters look at every instance of a host); None
    when the hint is absent or empty, which filters nothing in Nova either."""
    uuids = hints.get(name)
    if not uuids:
        return None
    return frozenset(
        session.scalars(
            select(Instance.host).where(
                Instance.uuid.in_(padded(uuids)),
                Instance.deleted == 0,
                Instance.host.is_not(None),
            )
        )
    )
