"""Instances made before cell0004 get their resource columns (vcpus, memory_mb, root_gb) from
their flavor snapshot, so quota usage and the scheduler sum columns instead of parsing every
instance's flavor document (servers/quota.py).

The snapshot is instance_extra.flavor, a JSON object in the compute API's names (vcpus, ram,
disk); an instance without one, or with a value that is not a whole number, keeps NULL and
counts as nothing, as it did. Read in pages of ids, so a large cell is never held at once.

Revision ID: cell0014
Revises: cell0013
Create Date: 2026-12-02 14:00:00
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "cell0014"
down_revision = "cell0013"
branch_labels = None
depends_on = None

PAGE = 1000

instances = sa.table(
    "instances",
    sa.column("id", sa.Integer),
    sa.column("uuid", sa.String),
    sa.column("vcpus", sa.Integer),
    sa.column("memory_mb", sa.Integer),
    sa.column("root_gb", sa.Integer),
)
extra = sa.table(
    "instance_extra", sa.column("instance_uuid", sa.String), sa.column("flavor", sa.Text)
)


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _resources(document: str | None) -> dict[str, int | None] | None:
    try:
        fields = json.loads(document) if document else None
    except ValueError:
        return None
    if not isinstance(fields, dict) or _whole(fields.get("vcpus")) is None:
        return None
    return {
        "vcpus": _whole(fields.get("vcpus")),
        "memory_mb": _whole(fields.get("ram")),
        "root_gb": _whole(fields.get("disk")),
    }


def upgrade() -> None:
    connection = op.get_bind()
    after = 0
    while True:
        page = connection.execute(
            sa.select(instances.c.id, extra.c.flavor)
            .select_from(instances)
            .join(extra, extra.c.instance_uuid == instances.c.uuid)
            .where(instances.c.vcpus.is_(None), instances.c.id > after)
            .order_by(instances.c.id)
            .limit(PAGE)
        ).all()
        if not page:
            return
        for instance_id, document in page:
            resources = _resources(document)
            if resources is not None:
                connection.execute(
                    instances.update().where(instances.c.id == instance_id).values(**resources)
                )
        after = page[-1][0]


def downgrade() -> None:
    # The columns stay filled: earlier revisions read them as the same numbers.
    pass
