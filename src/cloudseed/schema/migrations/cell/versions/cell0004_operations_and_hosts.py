"""Durable operations, compute services and nodes, and the host of each instance.

Revision ID: cell0004
Revises: cell0003
Create Date: 2026-11-24 09:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0004"
down_revision = "cell0003"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
LONG_TEXT = sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
TABLE_ARGS = {"mysql_charset": "utf8mb4", "mysql_engine": "InnoDB"}


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("host", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("node", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("vcpus", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("memory_mb", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("root_gb", sa.Integer(), nullable=True))
        batch.create_index(batch.f("ix_instances_host"), ["host"], unique=False)
    op.create_table(
        "operations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("action_id", sa.Integer(), nullable=True),
        sa.Column("payload", LONG_TEXT, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=255), nullable=True),
        sa.Column("lease_expires_at", TIMESTAMP, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operations")),
        sa.UniqueConstraint("uuid", name=op.f("uq_operations_uuid")),
        **TABLE_ARGS,
    )
    op.create_index(
        op.f("ix_operations_instance_uuid"), "operations", ["instance_uuid"], unique=False
    )
    op.create_index("ix_operations_host_state", "operations", ["host", "state"], unique=False)
    op.create_table(
        "services",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("binary", sa.String(length=255), nullable=False),
        sa.Column("topic", sa.String(length=255), nullable=True),
        sa.Column("availability_zone", sa.String(length=255), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.String(length=255), nullable=True),
        sa.Column("forced_down", sa.Boolean(), nullable=False),
        sa.Column("report_count", sa.Integer(), nullable=False),
        sa.Column("last_seen_up", TIMESTAMP, nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        sa.Column("deleted", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_services")),
        sa.UniqueConstraint("uuid", name=op.f("uq_services_uuid")),
        sa.UniqueConstraint(
            "host", "binary", "deleted", name=op.f("uq_services_host_binary_deleted")
        ),
        **TABLE_ARGS,
    )
    op.create_table(
        "compute_nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("service_id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("hypervisor_hostname", sa.String(length=255), nullable=False),
        sa.Column("hypervisor_type", sa.String(length=255), nullable=False),
        sa.Column("hypervisor_version", sa.Integer(), nullable=False),
        sa.Column("host_ip", sa.String(length=39), nullable=True),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.Integer(), nullable=False),
        sa.Column("local_gb", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        sa.Column("deleted", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compute_nodes")),
        sa.UniqueConstraint("uuid", name=op.f("uq_compute_nodes_uuid")),
        sa.UniqueConstraint(
            "host",
            "hypervisor_hostname",
            "deleted",
            name=op.f("uq_compute_nodes_host_hypervisor_hostname_deleted"),
        ),
        **TABLE_ARGS,
    )
    op.create_index(
        op.f("ix_compute_nodes_service_id"), "compute_nodes", ["service_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_compute_nodes_service_id"), table_name="compute_nodes")
    op.drop_table("compute_nodes")
    op.drop_table("services")
    op.drop_index("ix_operations_host_state", table_name="operations")
    op.drop_index(op.f("ix_operations_instance_uuid"), table_name="operations")
    op.drop_table("operations")
    with op.batch_alter_table("instances") as batch:
        batch.drop_index(batch.f("ix_instances_host"))
        batch.drop_column("root_gb")
        batch.drop_column("memory_mb")
        batch.drop_column("vcpus")
        batch.drop_column("node")
        batch.drop_column("host")
