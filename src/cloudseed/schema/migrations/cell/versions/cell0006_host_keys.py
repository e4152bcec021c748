"""Host key reports: what each guest said its SSH host keys are, per boot generation.

Revision ID: cell0007
Revises: cell0005
Create Date: 2026-11-25 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0007"
down_revision = "cell0005"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "host_key_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("launched_at", TIMESTAMP, nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=True),
        sa.Column("hostname", sa.String(length=255), nullable=True),
        sa.Column("fqdn", sa.String(length=255), nullable=True),
        sa.Column("keys", LONG_TEXT, nullable=False),
        sa.Column("recorded_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_host_key_reports_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_host_key_reports")),
        sa.UniqueConstraint(
            "instance_uuid",
            "launched_at",
            "source",
            "role",
            name=op.f("uq_host_key_reports_instance_uuid_launched_at_source_role"),
        ),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_index(
        op.f("ix_host_key_reports_instance_uuid"),
        "host_key_reports",
        ["instance_uuid"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_host_key_reports_instance_uuid"), table_name="host_key_reports")
    op.drop_table("host_key_reports")
