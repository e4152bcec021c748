"""Project keys (2.106): key pairs an administrator attaches to every server of a project.

Revision ID: api0004
Revises: api0003
Create Date: 2026-11-25 03:20:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "api0004"
down_revision = "api0003"
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
TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def upgrade() -> None:
    op.create_table(
        "project_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("key_name", NAME, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_keys")),
        sa.UniqueConstraint(
            "project_id",
            "user_id",
            "key_name",
            name=op.f("uq_project_keys_project_id_user_id_key_name"),
        ),
        **TABLE_ARGS,
    )
    op.create_index(op.f("ix_project_keys_project_id"), "project_keys", ["project_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_project_keys_project_id"), table_name="project_keys")
    op.drop_table("project_keys")
