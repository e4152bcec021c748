"""The Nova drop-in's own database: the identity signing keys (issue 31), the table cloudseed's
API database has (api0006), for ``cloudseed nova-metadata``'s signed instance identity.

Revision ID: nm0001
Revises:
Create Date: 2026-12-10 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "nm0001"
down_revision = None
branch_labels = None
depends_on = None

NAME = (
    sa.String(255)
    .with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    .with_variant(sa.VARCHAR(255, collation="C"), "postgresql")
)
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def upgrade() -> None:
    op.create_table(
        "identity_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kid", NAME, nullable=False),
        sa.Column("private_key", LONG_TEXT, nullable=False),
        sa.Column("certificate", LONG_TEXT, nullable=False),
        sa.Column("current_slot", sa.Integer(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("retired_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_identity_keys")),
        sa.UniqueConstraint("kid", name=op.f("uq_identity_keys_kid")),
        sa.UniqueConstraint("current_slot", name=op.f("uq_identity_keys_current_slot")),
        **TABLE_ARGS,
    )


def downgrade() -> None:
    op.drop_table("identity_keys")
