"""Boot reports (2.110): the events of each server's latest reported boot, as cloud-init's
webhook posted them. The boot's status lives in the server's system metadata (no column).

Revision ID: cell0010
Revises: cell0009
Create Date: 2026-11-29 02:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0010"
down_revision = "cell0009"
branch_labels = None
depends_on = None

NAME = (
    sa.String(255)
    .with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    .with_variant(sa.VARCHAR(255, collation="C"), "postgresql")
)
TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "boot_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("generation", sa.String(length=32), nullable=False),
        sa.Column("boot", sa.Integer(), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("event_type", sa.String(length=8), nullable=False),
        sa.Column("result", sa.String(length=8), nullable=True),
        sa.Column("origin", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("guest_time", TIMESTAMP, nullable=False),
        sa.Column("received_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_boot_events_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_boot_events")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_index(
        op.f("ix_boot_events_instance_uuid"), "boot_events", ["instance_uuid"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_boot_events_instance_uuid"), table_name="boot_events")
    op.drop_table("boot_events")
