"""Tags: server tags (Nova's 2.26) and the device role tag of each port (2.32, 2.42).

Revision ID: cell0008
Revises: cell0007
Create Date: 2026-12-05 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0008"
down_revision = "cell0007"
branch_labels = None
depends_on = None

NAME = (
    sa.String(255)
    .with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    .with_variant(sa.VARCHAR(255, collation="C"), "postgresql")
)


def upgrade() -> None:
    op.create_table(
        "instance_tags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("tag", NAME, nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_instance_tags_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_tags")),
        sa.UniqueConstraint(
            "instance_uuid", "tag", name=op.f("uq_instance_tags_instance_uuid_tag")
        ),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_index(
        op.f("ix_instance_tags_instance_uuid"), "instance_tags", ["instance_uuid"], unique=False
    )
    op.create_index(op.f("ix_instance_tags_tag"), "instance_tags", ["tag"], unique=False)
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tag", sa.String(length=60), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.drop_column("tag")
    op.drop_index(op.f("ix_instance_tags_tag"), table_name="instance_tags")
    op.drop_index(op.f("ix_instance_tags_instance_uuid"), table_name="instance_tags")
    op.drop_table("instance_tags")
