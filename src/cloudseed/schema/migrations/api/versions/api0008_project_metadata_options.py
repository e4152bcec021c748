"""Per-server metadata options (2.109): the defaults an administrator sets for a project's
new servers.

Revision ID: api0008
Revises: api0007
Create Date: 2026-11-28 22:40:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "api0008"
down_revision = "api0007"
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
        "project_metadata_options",
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_project_metadata_options")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("project_metadata_options")
