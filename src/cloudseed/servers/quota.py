"""Instance quota usage: the instances, cores and RAM of a project (and of one user in it),
counted from the cells as Nova's legacy counting does (non-deleted instances; cores and RAM
summed from the instances' resource columns, copied from the flavor at create, so a later
flavor edit does not change usage).

The limits and the check are ``cloudseed.quotas`` (generic, below servers); this module is
where the counting happens, because only servers knows the instance tables.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.quotas.service import Usage
from cloudseed.servers.models import Instance


def count_in(session: Session, *, project_id: str, user_id: str | None = None) -> Usage:
    """Usage in one cell database, as this session sees it (its own inserts included): sums
    of the resource columns, which hold the flavor snapshot's numbers (copied at create,
    filled for older instances by migration cell0014; an instance without a snapshot counts
    as an instance of no cores and no RAM)."""
    query = select(
        func.count(Instance.id),
        func.coalesce(func.sum(Instance.vcpus), 0),
        func.coalesce(func.sum(Instance.memory_mb), 0),
    ).where(Instance.project_id == project_id, Instance.deleted == 0)
    if user_id is not None:
        query = query.where(Instance.user_id == user_id)
    instances, cores, ram = session.execute(query).one()
    # Decimal on MySQL; never NULL (coalesce), but typed as the columns are.
    return Usage(instances=int(instances), cores=int(cores or 0), ram=int(ram or 0))


def add(a: Usage, b: Usage) -> Usage:
    return Usage(instances=a.instances + b.instances, cores=a.cores + b.cores, ram=a.ram + b.ram)


def count(
    cells: CellDatabases,
    *,
    project_id: str,
    user_id: str | None = None,
    except_cell: int | None = None,
) -> Usage:
    """Usage across every cell (each read in its own transaction), leaving out
    ``except_cell`` (the caller counts that one in its own session)."""
    total = Usage()
    for cell_id, db in cells.all_cells_by_id().items():
        if cell_id == except_cell:
            continue
        with db.read() as session:
            total = add(total, count_in(session, project_id=project_id, user_id=user_id))
    return total


def usages(cells: CellDatabases, project_id: str, user_id: str | None) -> dict[str, int]:
    """The in-use numbers of the quota-sets API (``quotas.api``'s usage counter)."""
    return count(cells, project_id=project_id, user_id=user_id).as_dict()


def by_host(session: Session, hosts: list[str]) -> dict[str, tuple[int, int, int, int]]:
    """(vcpus, memory_mb, root_gb, instances) the live instances of each host use, for the
    scheduler and os-hypervisors. An instance without a flavor snapshot counts as nothing
    but an instance."""
    if not hosts:
        return {}
    rows = session.execute(
        select(
            Instance.host,
            func.coalesce(func.sum(Instance.vcpus), 0),
            func.coalesce(func.sum(Instance.memory_mb), 0),
            func.coalesce(func.sum(Instance.root_gb), 0),
            func.count(Instance.id),
        )
        .where(Instance.host.in_(sorted(set(hosts))), Instance.deleted == 0)
        .group_by(Instance.host)
    )
    return {
        str(host): (int(v or 0), int(m or 0), int(d or 0), int(n or 0)) for host, v, m, d, n in rows
    }
