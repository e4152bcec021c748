"""Drop the index on instances.deleted alone.

Nearly every instance has deleted = 0, so the index narrows nothing; but SQLite, without
statistics, took it for ``uuid IN (...) AND deleted = 0`` instead of the unique index on
uuid, and read every live instance for each batch the metadata service loads ahead or an
agent loads (7.5 ms a batch of 6 among 14,000 instances, against 0.03 ms by uuid). The
queries that filter on deleted with something selective have an index that leads with that
(uuid, host, project_id and the server list's).

Revision ID: cell0015
Revises: cell0014
Create Date: 2026-12-02 15:10:00
"""

from alembic import op

revision = "cell0015"
down_revision = "cell0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_instances_deleted", table_name="instances")


def downgrade() -> None:
    op.create_index("ix_instances_deleted", "instances", ["deleted"], unique=False)
