"""Console tails: the end of each guest's console, stored by its compute agent for every API
node to read.

Revision ID: cell0007
Revises: cell0006
Create Date: 2026-12-01 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0007"
down_revision = "cell0006"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_BINARY = sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "console_tails",
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("output", LONG_BINARY, nullable=False),
        sa.Column("stamp", sa.String(length=255), nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_console_tails_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("instance_uuid", name=op.f("pk_console_tails")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("console_tails")
