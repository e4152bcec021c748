"""Initial API database schema: key pairs, cell and instance mappings, quota overrides.

Revision ID: api0001
Revises:
Create Date: 2026-11-22

The column types are spelled out here rather than imported from the models, so this revision
keeps meaning the same thing when the models change later.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "api0001"
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
TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
TABLE_ARGS = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _timestamps(*, updated: bool = True) -> list[sa.Column]:
    columns = [sa.Column("created_at", TIMESTAMP, nullable=False)]
    if updated:
        columns.append(sa.Column("updated_at", TIMESTAMP, nullable=True))
    return columns


def upgrade() -> None:
    op.create_table(
        "cell_mappings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("database_connection", sa.Text(), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cell_mappings")),
        sa.UniqueConstraint("name", name=op.f("uq_cell_mappings_name")),
        sa.UniqueConstraint("uuid", name=op.f("uq_cell_mappings_uuid")),
        **TABLE_ARGS,
    )
    op.create_table(
        "key_pairs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("fingerprint", sa.String(255), nullable=False),
        sa.Column("fingerprint_sha256", sa.String(64), nullable=False),
        sa.Column("public_key", LONG_TEXT, nullable=False),
        sa.Column(
            "type",
            sa.Enum("ssh", "x509", name="keypair_types"),
            server_default="ssh",
            nullable=False,
        ),
        *_timestamps(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_key_pairs")),
        sa.UniqueConstraint("user_id", "name", name=op.f("uq_key_pairs_user_id_name")),
        **TABLE_ARGS,
    )
    op.create_table(
        "quotas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("resource", sa.String(255), nullable=False),
        sa.Column("hard_limit", sa.Integer(), nullable=False),
        *_timestamps(updated=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quotas")),
        sa.UniqueConstraint("project_id", "resource", name=op.f("uq_quotas_project_id_resource")),
        **TABLE_ARGS,
    )
    op.create_table(
        "project_user_quotas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("resource", sa.String(255), nullable=False),
        sa.Column("hard_limit", sa.Integer(), nullable=False),
        *_timestamps(updated=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_user_quotas")),
        sa.UniqueConstraint(
            "user_id",
            "project_id",
            "resource",
            name=op.f("uq_project_user_quotas_user_id_project_id_resource"),
        ),
        **TABLE_ARGS,
    )
    op.create_table(
        "instance_mappings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("cell_id", sa.Integer(), nullable=True),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("queued_for_delete", sa.Boolean(), nullable=False),
        *_timestamps(),
        sa.ForeignKeyConstraint(
            ["cell_id"],
            ["cell_mappings.id"],
            name=op.f("fk_instance_mappings_cell_id_cell_mappings"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_mappings")),
        sa.UniqueConstraint("instance_uuid", name=op.f("uq_instance_mappings_instance_uuid")),
        **TABLE_ARGS,
    )
    op.create_index(op.f("ix_instance_mappings_cell_id"), "instance_mappings", ["cell_id"])
    op.create_index(op.f("ix_instance_mappings_project_id"), "instance_mappings", ["project_id"])


def downgrade() -> None:
    op.drop_table("instance_mappings")
    op.drop_table("project_user_quotas")
    op.drop_table("quotas")
    op.drop_table("key_pairs")
    op.drop_table("cell_mappings")
    sa.Enum(name="keypair_types").drop(op.get_bind(), checkfirst=True)
