"""Images a project creates and uploads through the Glance slice: owner, visibility,
protected, os_hidden, tags and the md5 checksum; an image without data yet (queued) has no
file, size, checksum or formats.

Revision ID: api0005
Revises: api0004
Create Date: 2026-11-25 09:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "api0005"
down_revision = "api0004"
branch_labels = None
depends_on = None

NAME = (
    sa.String(255)
    .with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    .with_variant(sa.VARCHAR(255, collation="C"), "postgresql")
)
# Columns an image without data leaves empty.
NOW_NULLABLE = (
    ("name", NAME),
    ("disk_format", sa.String(length=32)),
    ("container_format", sa.String(length=32)),
    ("path", sa.Text()),
    ("size", sa.BigInteger()),
    ("checksum_sha256", sa.String(length=64)),
)


def upgrade() -> None:
    with op.batch_alter_table("images") as batch:
        batch.add_column(sa.Column("checksum_md5", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("owner", NAME, nullable=True))
        # Every image registered so far is the operator's, seen by every project.
        batch.add_column(
            sa.Column("visibility", sa.String(length=16), nullable=False, server_default="public")
        )
        batch.add_column(
            sa.Column("protected", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(
            sa.Column("os_hidden", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("tags", sa.Text(), nullable=True))
        for name, type_ in NOW_NULLABLE:
            batch.alter_column(name, existing_type=type_, nullable=True)
        batch.create_index(batch.f("ix_images_owner"), ["owner"], unique=False)


def downgrade() -> None:
    # Images without data cannot be represented before this revision.
    op.execute(sa.text("DELETE FROM images WHERE path IS NULL"))
    op.execute(sa.text("UPDATE images SET name = '' WHERE name IS NULL"))
    op.execute(
        sa.text("UPDATE images SET container_format = 'bare' WHERE container_format IS NULL")
    )
    with op.batch_alter_table("images") as batch:
        batch.drop_index(batch.f("ix_images_owner"))
        for name, type_ in NOW_NULLABLE:
            batch.alter_column(name, existing_type=type_, nullable=False)
        for name in ("tags", "os_hidden", "protected", "visibility", "owner", "checksum_md5"):
            batch.drop_column(name)
