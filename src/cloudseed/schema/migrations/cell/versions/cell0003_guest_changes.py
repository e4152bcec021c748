"""The change feed that tells every metadata worker which instances changed.

Revision ID: cell0003
Revises: cell0002
Create Date: 2026-11-22 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0003"
down_revision = "cell0002"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "guest_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("changed_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_guest_changes")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_index(
        op.f("ix_guest_changes_changed_at"), "guest_changes", ["changed_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_guest_changes_changed_at"), table_name="guest_changes")
    op.drop_table("guest_changes")
