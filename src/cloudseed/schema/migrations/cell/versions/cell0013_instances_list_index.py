"""An index for a project's server list: live servers, newest first (servers/listing.py).

Revision ID: cell0013
Revises: cell0012
Create Date: 2026-12-06 11:00:00
"""

from alembic import op

revision = "cell0013"
down_revision = "cell0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_instances_project_listed",
        "instances",
        ["project_id", "deleted", "created_at", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_instances_project_listed", table_name="instances")
