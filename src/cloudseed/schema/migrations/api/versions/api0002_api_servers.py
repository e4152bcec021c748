"""Registries for servers: flavors, images, networks and address allocations.

Revision ID: api0002
Revises: api0001
Create Date: 2026-11-22 03:30:55.006785
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "api0002"
down_revision = "api0001"
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


def upgrade() -> None:
    op.create_table(
        "flavors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("flavorid", NAME, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("root_gb", sa.Integer(), nullable=False),
        sa.Column("ephemeral_gb", sa.Integer(), nullable=False),
        sa.Column("swap", sa.Integer(), nullable=False),
        sa.Column("is_public", sa.Boolean(), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flavors")),
        sa.UniqueConstraint("flavorid", name=op.f("uq_flavors_flavorid")),
        sa.UniqueConstraint("name", name=op.f("uq_flavors_name")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "images",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("disk_format", sa.String(length=32), nullable=False),
        sa.Column("container_format", sa.String(length=32), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("checksum_sha256", sa.String(length=64), nullable=False),
        sa.Column("min_disk", sa.Integer(), nullable=False),
        sa.Column("min_ram", sa.Integer(), nullable=False),
        sa.Column("properties", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_images")),
        sa.UniqueConstraint("uuid", name=op.f("uq_images_uuid")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("images", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_images_name"), ["name"], unique=False)

    op.create_table(
        "ip_allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=39), nullable=False),
        sa.Column("network_uuid", sa.String(length=36), nullable=False),
        sa.Column("port_uuid", sa.String(length=36), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ip_allocations")),
        sa.UniqueConstraint("address", name=op.f("uq_ip_allocations_address")),
        sa.UniqueConstraint("port_uuid", name=op.f("uq_ip_allocations_port_uuid")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("ip_allocations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_ip_allocations_instance_uuid"), ["instance_uuid"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_ip_allocations_network_uuid"), ["network_uuid"], unique=False
        )

    op.create_table(
        "networks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("cidr", sa.String(length=64), nullable=False),
        sa.Column("gateway", sa.String(length=39), nullable=True),
        sa.Column("dns_nameservers", sa.Text(), nullable=False),
        sa.Column("mtu", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_networks")),
        sa.UniqueConstraint("name", name=op.f("uq_networks_name")),
        sa.UniqueConstraint("uuid", name=op.f("uq_networks_uuid")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("networks")
    with op.batch_alter_table("ip_allocations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ip_allocations_network_uuid"))
        batch_op.drop_index(batch_op.f("ix_ip_allocations_instance_uuid"))

    op.drop_table("ip_allocations")
    with op.batch_alter_table("images", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_images_name"))

    op.drop_table("images")
    op.drop_table("flavors")
