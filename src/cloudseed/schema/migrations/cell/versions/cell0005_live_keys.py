"""Live keys (2.106): the key set's generation, what the guest holds, project-key opt-out.

Revision ID: cell0005
Revises: cell0004
Create Date: 2026-11-25 03:20:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0005"
down_revision = "cell0004"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("instance_extra") as batch:
        batch.add_column(
            sa.Column("keys_generation", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("keys_boot_generation", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(
            sa.Column("keys_applied_generation", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("keys_applied_via", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("keys_applied_at", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("keys_failure", sa.Text(), nullable=True))
        batch.add_column(sa.Column("keys_pushed", LONG_TEXT, nullable=True))
        batch.add_column(
            sa.Column("block_project_keys", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("instance_extra") as batch:
        for column in (
            "block_project_keys",
            "keys_pushed",
            "keys_failure",
            "keys_applied_at",
            "keys_applied_via",
            "keys_applied_generation",
            "keys_boot_generation",
            "keys_generation",
        ):
            batch.drop_column(column)
