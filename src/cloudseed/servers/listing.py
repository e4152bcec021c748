"""Listing servers across cells with Nova's filters, sort order and marker pagination."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TypeVarTuple

from sqlalchemy import ColumnElement, Select, and_, bindparam, exists, false, or_, select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.db.in_lists import padded
from cloudseed.errors import InvalidInput
from cloudseed.servers import records, states
from cloudseed.servers.errors import ServerMarkerNotFound
from cloudseed.servers.models import Instance, InstanceTag
from cloudseed.servers.tags import MAX_TAGS, TagFilter

_Columns = TypeVarTuple("_Columns")


@dataclass(frozen=True)
class ListFilter:
    project_id: str | None  # None: all projects (administrators with all_tenants)
    name: str | None = None  # a regular expression, as in Nova
    key_name: str | None = None
    status: str | None = None
    image: str | None = None  # an image id
    flavor: str | None = None  # a flavor id
    ip: str | None = None  # a regular expression on the IPv4 addresses, as in Nova
    ip6: str | None = None  # the same on the IPv6 addresses
    host: str | None = None  # administrators only
    reservation_id: str | None = None  # the servers of one (multi-)create
    changes_since: dt.datetime | None = None
    tags: TagFilter = field(
        default_factory=TagFilter
    )  # 2.26's tags, tags-any, not-tags, not-tags-any
    limit: int = 1000
    marker: str | None = None


@dataclass(frozen=True)
class ListedServer:
    """What ``GET /servers`` (Nova's basic view) shows of a server, and where it sorts."""

    uuid: str
    name: str
    created_at: dt.datetime
    id: int


# The basic list's columns: four narrow values per server rather than an Instance and the
# five queries of its record (ORM objects for its extras, ports and addresses), which were
# nearly all of a ``GET /servers?limit=100``'s time.
_LISTED_COLUMNS = (Instance.uuid, Instance.display_name, Instance.created_at, Instance.id)
_INSTANCES_BY_ID = select(Instance).where(Instance.id.in_(bindparam("ids", expanding=True)))


def list_servers(cells: CellDatabases, f: ListFilter) -> list[records.ServerRecord]:
    """Newest first (created_at, then id, descending); ``marker`` is the last uuid seen."""
    name_re, ip_res = _patterns(f)
    marker_key = _marker_key(cells, f.marker)
    found: list[records.ServerRecord] = []
    for db in cells.all_cells():
        with db.read() as session:
            if ip_res:
                # Every candidate's addresses are needed to know whether it matches.
                query = _cell_query(select(Instance), f, marker_key)
                if query is None:
                    return []
                candidates = [
                    i
                    for i in session.scalars(query)
                    if name_re is None or name_re.search(i.display_name)
                ]
                loaded = records.load_many(session, candidates) if candidates else []
                found.extend(r for r in loaded if _addresses_match(r, ip_res))
                continue
            page = _page(session, f, name_re, marker_key)
            if page is None:
                return []
            if page:
                # The page's rows by primary key: sorting whole rows (user data, key data)
                # cost SQLite five times the narrow page's sort.
                by_id = {
                    i.id: i
                    for i in session.scalars(
                        _INSTANCES_BY_ID, {"ids": padded([s.id for s in page])}
                    )
                }
                instances = [by_id[s.id] for s in page if s.id in by_id]
                found.extend(records.load_many(session, instances))
    found.sort(key=lambda r: (r.instance.created_at, r.instance.id), reverse=True)
    return found[: f.limit]


def list_server_names(cells: CellDatabases, f: ListFilter) -> list[ListedServer]:
    """``list_servers`` for the basic view: the same servers in the same order, read as
    four columns each. An ``ip``/``ip6`` filter needs every candidate's addresses: then the
    full records are read and narrowed."""
    name_re, ip_res = _patterns(f)
    if ip_res:
        return [
            ListedServer(
                r.instance.uuid, r.instance.display_name, r.instance.created_at, r.instance.id
            )
            for r in list_servers(cells, f)
        ]
    marker_key = _marker_key(cells, f.marker)
    found: list[ListedServer] = []
    for db in cells.all_cells():
        with db.read() as session:
            page = _page(session, f, name_re, marker_key)
        if page is None:
            return []
        found.extend(page)
    found.sort(key=lambda s: (s.created_at, s.id), reverse=True)
    return found[: f.limit]


def _page(
    session: Session,
    f: ListFilter,
    name_re: re.Pattern[str] | None,
    marker_key: tuple[dt.datetime, int] | None,
) -> list[ListedServer] | None:
    """One cell's servers of the page, newest first, at most ``f.limit``; None when the
    filter's ``status`` matches no server. Without a name to match here, the query stops at
    the page's length: only the page is read, however many servers the project has."""
    query = _cell_query(select(*_LISTED_COLUMNS), f, marker_key)
    if query is None:
        return None
    if name_re is None:
        query = query.limit(f.limit)
    listed = [
        ListedServer(uuid, name, created_at, id_)
        for uuid, name, created_at, id_ in session.execute(query)
        if name_re is None or name_re.search(name)
    ]
    return listed[: f.limit]


def _patterns(f: ListFilter) -> tuple[re.Pattern[str] | None, dict[int, re.Pattern[str]]]:
    """The filter's regular expressions: ``name``'s, and ``ip``/``ip6``'s by IP version."""
    try:
        name_re = re.compile(f.name) if f.name else None
        ip_res = {
            version: re.compile(pattern)
            for version, pattern in ((4, f.ip), (6, f.ip6))
            if pattern is not None
        }
    except re.error as exc:
        raise InvalidInput(f"Invalid regular expression: {exc}") from exc
    return name_re, ip_res


def _cell_query(
    query: Select[*_Columns], f: ListFilter, marker_key: tuple[dt.datetime, int] | None
) -> Select[*_Columns] | None:
    """``query`` (of instances) with the filter's conditions and the list's order, in SQL;
    None when its ``status`` matches no server."""
    query = query.order_by(Instance.created_at.desc(), Instance.id.desc())
    if f.project_id is not None:
        query = query.where(Instance.project_id == f.project_id)
    if f.changes_since is not None:
        query = query.where(Instance.updated_at >= f.changes_since)
    else:
        query = query.where(Instance.deleted == 0)
    if f.key_name is not None:
        query = query.where(Instance.key_name == f.key_name)
    if f.image is not None:
        query = query.where(Instance.image_ref == f.image)
    if f.flavor is not None:
        query = query.where(Instance.flavor_id == f.flavor)
    if f.host is not None:
        query = query.where(Instance.host == f.host)
    if f.reservation_id is not None:
        query = query.where(Instance.reservation_id == f.reservation_id)
    if f.tags:
        query = _with_tags(query, f.tags)
    if f.status is not None:
        chosen = states.STATUS_FILTERS.get(f.status.upper(), [])
        if not chosen:
            return None
        query = query.where(or_(*[_status_condition(c) for c in chosen]))
    if marker_key is not None:
        created_at, id_ = marker_key
        query = query.where(
            or_(
                Instance.created_at < created_at,
                and_(Instance.created_at == created_at, Instance.id < id_),
            )
        )
    return query


def _has_tag(tag: str) -> ColumnElement[bool]:
    return exists().where(InstanceTag.instance_uuid == Instance.uuid, InstanceTag.tag == tag)


def _with_tags(query: Select[*_Columns], tags: TagFilter) -> Select[*_Columns]:
    """Nova's tag filters: every one of ``tags``, at least one of ``tags-any``, not every one
    of ``not-tags``, none of ``not-tags-any``. A server has at most MAX_TAGS tags: more in
    ``tags`` match no server, more in ``not-tags`` every one (without a query of that size)."""
    if len(tags.all_of) > MAX_TAGS:
        return query.where(false())
    if tags.all_of:
        query = query.where(*[_has_tag(t) for t in tags.all_of])
    if tags.any_of:
        query = query.where(
            exists().where(
                InstanceTag.instance_uuid == Instance.uuid, InstanceTag.tag.in_(tags.any_of)
            )
        )
    if tags.not_all_of and len(tags.not_all_of) <= MAX_TAGS:
        query = query.where(~and_(*[_has_tag(t) for t in tags.not_all_of]))
    if tags.none_of:
        query = query.where(
            ~exists().where(
                InstanceTag.instance_uuid == Instance.uuid, InstanceTag.tag.in_(tags.none_of)
            )
        )
    return query


def _status_condition(chosen: states.StatusFilter) -> ColumnElement[bool]:
    """SQL for one vm_state's part of a ``status=X`` filter (``states.StatusFilter``)."""
    in_vm_state = Instance.vm_state == chosen.vm_state
    if chosen.untasked and not chosen.named_tasks:
        return in_vm_state  # every task_state of it shows the one status (BUILD)
    task = Instance.task_state
    shown: list[ColumnElement[bool]] = []
    if chosen.tasks:
        shown.append(task.in_(chosen.tasks))
    if chosen.untasked:
        shown += [task.is_(None), task.not_in(chosen.named_tasks)]
    return and_(in_vm_state, or_(*shown))


def _marker_key(cells: CellDatabases, marker: str | None) -> tuple[dt.datetime, int] | None:
    """Where the marker server sorts (created_at, id), from whichever cell holds it; None
    without a marker. A marker no cell holds is Nova's 400."""
    if marker is None:
        return None
    for db in cells.all_cells():
        with db.read() as session:
            row = session.execute(
                select(Instance.created_at, Instance.id).where(Instance.uuid == marker)
            ).first()
        if row is not None:
            return (row[0], row[1])
    raise ServerMarkerNotFound(marker)


def _addresses_match(record: records.ServerRecord, patterns: dict[int, re.Pattern[str]]) -> bool:
    """Every pattern (by IP version) matches one of the server's addresses of that version."""
    return all(
        any(
            ip.version == version and pattern.search(ip.address)
            for _, ips in record.ports
            for ip in ips
        )
        for version, pattern in patterns.items()
    )
