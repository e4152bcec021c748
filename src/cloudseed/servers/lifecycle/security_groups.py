"""A server's security groups, as Nova shows them with Neutron but without a firewall: the
names are kept per server (system metadata ``security_groups``), shown in the server view and
``/servers/{id}/os-security-groups``, served to the guest (EC2 ``security-groups``), and
changed by the ``addSecurityGroup`` and ``removeSecurityGroup`` actions. They filter no
traffic.

The only group there is is each project's ``default`` (cloudseed's Neutron slice has no
security groups API). In Nova the groups are the server's ports', so a server without ports
has none, and adding to or removing from it is a 404; cloudseed keeps that. Session-taking
functions: the caller owns the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy.orm import Session

from cloudseed.servers import records
from cloudseed.servers.errors import (
    NoPortsForSecurityGroup,
    SecurityGroupNotAssociated,
    SecurityGroupNotFound,
    UnknownSecurityGroup,
)
from cloudseed.servers.system_metadata import (
    DEFAULT_SECURITY_GROUP,
    SECURITY_GROUPS,
    security_group_names,
)

# The groups every project has, with their descriptions (Neutron's for its default group).
KNOWN = {DEFAULT_SECURITY_GROUP: "Default security group"}


def check_known(name: str, *, project_id: str) -> None:
    if name not in KNOWN:
        raise SecurityGroupNotFound(name, project_id=project_id)


def requested(groups: Iterable[dict[str, str]], *, project_id: str) -> list[str]:
    """A create's ``security_groups``: the names, once each (entries without one are skipped,
    as Nova does); one that does not exist is a 400."""
    names = list(dict.fromkeys(g["name"] for g in groups if g.get("name")))
    for name in names:
        if name not in KNOWN:
            raise UnknownSecurityGroup(name, project_id=project_id)
    return names


def initial(names: list[str], *, has_ports: bool) -> str:
    """The stored form for a new server: ``requested``'s names, ``default`` when the request
    named none; none without ports."""
    return json.dumps((names or [DEFAULT_SECURITY_GROUP]) if has_ports else [])


def add(session: Session, uuid: str, name: str, *, project_id: str) -> None:
    """``addSecurityGroup``; a group the server is in already is a no-op, as Neutron takes a
    port's groups as a set."""
    names = _changing(session, uuid, name, project_id=project_id)
    if name not in names:
        _store(session, uuid, [*names, name])


def remove(session: Session, uuid: str, name: str, *, project_id: str) -> None:
    """``removeSecurityGroup``; the last one may go, and then the view shows none."""
    names = _changing(session, uuid, name, project_id=project_id)
    if name not in names:
        raise SecurityGroupNotAssociated(name, uuid=uuid)
    _store(session, uuid, [n for n in names if n != name])


def _changing(session: Session, uuid: str, name: str, *, project_id: str) -> list[str]:
    # Nova's order: the group is looked up (the caller's project), then the server's ports.
    record = records.load(session, uuid, for_update=True)
    check_known(name, project_id=project_id)
    if not record.ports:
        raise NoPortsForSecurityGroup(uuid)
    return security_group_names(record.system_metadata, has_ports=True)


def _store(session: Session, uuid: str, names: list[str]) -> None:
    records.set_system_metadata(session, uuid, SECURITY_GROUPS, json.dumps(names))
    records.guest_changed(session, uuid)  # the EC2 tree's security-groups
