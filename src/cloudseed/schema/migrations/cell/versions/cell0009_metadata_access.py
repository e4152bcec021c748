"""The token-less metadata access audit (2.109): per server, the requests made without a
session token, and the user data and password reads among them.

Revision ID: cell0009
Revises: cell0008
Create Date: 2026-11-28 22:40:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0009"
down_revision = "cell0008"
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
        "metadata_access",
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("tokenless_count", sa.BigInteger(), nullable=False),
        sa.Column("tokenless_last_at", TIMESTAMP, nullable=True),
        sa.Column("user_data_count", sa.BigInteger(), nullable=False),
        sa.Column("user_data_last_at", TIMESTAMP, nullable=True),
        sa.Column("password_count", sa.BigInteger(), nullable=False),
        sa.Column("password_last_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("instance_uuid", name=op.f("pk_metadata_access")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_index(op.f("ix_metadata_access_project_id"), "metadata_access", ["project_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_metadata_access_project_id"), table_name="metadata_access")
    op.drop_table("metadata_access")
