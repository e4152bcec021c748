"""Images: the virtual size, what a guest's root disk needs.

Revision ID: api0003
Revises: api0002
Create Date: 2026-11-24 01:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "api0003"
down_revision = "api0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("images") as batch:
        batch.add_column(sa.Column("virtual_size", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("images") as batch:
        batch.drop_column("virtual_size")
