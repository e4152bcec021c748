"""Acknowledged lifecycle notices (2.111): an operation's earliest start and its guest's
acknowledgement.

Revision ID: cell0011
Revises: cell0010
Create Date: 2026-12-05 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0011"
down_revision = "cell0010"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    with op.batch_alter_table("operations") as batch:
        batch.add_column(sa.Column("not_before", TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("acknowledged_at", TIMESTAMP, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("acknowledged_at")
        batch.drop_column("not_before")
