"""The change feed also says when an instance's guest begins to boot (a build, rebuild,
reboot or start has just finished), so that metadata workers load it ahead of its first
request (metadata/feed.py).

Revision ID: cell0012
Revises: cell0011
Create Date: 2026-12-06 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "cell0012"
down_revision = "cell0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("guest_changes") as batch:
        batch.add_column(sa.Column("boot", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("guest_changes") as batch:
        batch.drop_column("boot")
