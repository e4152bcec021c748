"""Instances: records, extra documents, metadata, ports, actions and the bootstrap history.

Revision ID: cell0002
Revises: cell0001
Create Date: 2026-11-22 03:30:55.045375
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "cell0002"
down_revision = "cell0001"
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
        "instances",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("display_name", sa.String(length=255), nullable=False),
        sa.Column("display_description", sa.String(length=255), nullable=True),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("image_ref", sa.String(length=255), nullable=False),
        sa.Column("flavor_id", sa.String(length=255), nullable=False),
        sa.Column("vm_state", sa.String(length=255), nullable=False),
        sa.Column("task_state", sa.String(length=255), nullable=True),
        sa.Column("power_state", sa.Integer(), nullable=False),
        sa.Column("key_name", sa.String(length=255), nullable=True),
        sa.Column("key_data", LONG_TEXT, nullable=True),
        sa.Column("user_data", LONG_TEXT, nullable=True),
        sa.Column("config_drive", sa.String(length=255), nullable=False),
        sa.Column("launch_index", sa.Integer(), nullable=False),
        sa.Column("reservation_id", sa.String(length=255), nullable=False),
        sa.Column("availability_zone", sa.String(length=255), nullable=True),
        sa.Column("access_ip_v4", sa.String(length=39), nullable=True),
        sa.Column("access_ip_v6", sa.String(length=39), nullable=True),
        sa.Column("locked", sa.Boolean(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.Column("launched_at", TIMESTAMP, nullable=True),
        sa.Column("terminated_at", TIMESTAMP, nullable=True),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        sa.Column("deleted", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instances")),
        sa.UniqueConstraint("uuid", name=op.f("uq_instances_uuid")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("instances", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_instances_deleted"), ["deleted"], unique=False)
        batch_op.create_index(batch_op.f("ix_instances_project_id"), ["project_id"], unique=False)

    op.create_table(
        "bootstrap_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("field", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=255), nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("changed_at", TIMESTAMP, nullable=False),
        sa.Column("old_value", sa.Text(), nullable=True),
        sa.Column("new_value", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_bootstrap_changes_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bootstrap_changes")),
        sa.UniqueConstraint(
            "instance_uuid", "version", name=op.f("uq_bootstrap_changes_instance_uuid_version")
        ),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("bootstrap_changes", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_bootstrap_changes_instance_uuid"), ["instance_uuid"], unique=False
        )

    op.create_table(
        "instance_actions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("action", sa.String(length=255), nullable=False),
        sa.Column("request_id", sa.String(length=255), nullable=False),
        sa.Column("user_id", NAME, nullable=False),
        sa.Column("project_id", NAME, nullable=False),
        sa.Column("start_time", TIMESTAMP, nullable=False),
        sa.Column("finish_time", TIMESTAMP, nullable=True),
        sa.Column("message", sa.String(length=255), nullable=True),
        sa.Column("updated_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_instance_actions_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_actions")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("instance_actions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_instance_actions_instance_uuid"), ["instance_uuid"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_instance_actions_request_id"), ["request_id"], unique=False
        )

    op.create_table(
        "instance_extra",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("keypairs", LONG_TEXT, nullable=True),
        sa.Column("flavor", sa.Text(), nullable=True),
        sa.Column("fault", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_instance_extra_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_extra")),
        sa.UniqueConstraint("instance_uuid", name=op.f("uq_instance_extra_instance_uuid")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "instance_metadata",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("key", NAME, nullable=False),
        sa.Column("value", sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_instance_metadata_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_metadata")),
        sa.UniqueConstraint(
            "instance_uuid", "key", name=op.f("uq_instance_metadata_instance_uuid_key")
        ),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("instance_metadata", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_instance_metadata_instance_uuid"), ["instance_uuid"], unique=False
        )

    op.create_table(
        "instance_system_metadata",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("key", NAME, nullable=False),
        sa.Column("value", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["instance_uuid"],
            ["instances.uuid"],
            name=op.f("fk_instance_system_metadata_instance_uuid_instances"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_system_metadata")),
        sa.UniqueConstraint(
            "instance_uuid", "key", name=op.f("uq_instance_system_metadata_instance_uuid_key")
        ),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("instance_system_metadata", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_instance_system_metadata_instance_uuid"), ["instance_uuid"], unique=False
        )

    op.create_table(
        "ports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.Column("network_id", sa.String(length=36), nullable=False),
        sa.Column("network_name", sa.String(length=255), nullable=False),
        sa.Column("mac_address", sa.String(length=17), nullable=False),
        sa.Column("mtu", sa.Integer(), nullable=False),
        sa.Column("network_info", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"], ["instances.uuid"], name=op.f("fk_ports_instance_uuid_instances")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ports")),
        sa.UniqueConstraint("mac_address", name=op.f("uq_ports_mac_address")),
        sa.UniqueConstraint("uuid", name=op.f("uq_ports_uuid")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_ports_instance_uuid"), ["instance_uuid"], unique=False)

    op.create_table(
        "fixed_ips",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=39), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("port_uuid", sa.String(length=36), nullable=False),
        sa.Column("instance_uuid", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_uuid"], ["instances.uuid"], name=op.f("fk_fixed_ips_instance_uuid_instances")
        ),
        sa.ForeignKeyConstraint(
            ["port_uuid"], ["ports.uuid"], name=op.f("fk_fixed_ips_port_uuid_ports")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fixed_ips")),
        sa.UniqueConstraint("address", name=op.f("uq_fixed_ips_address")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("fixed_ips", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_fixed_ips_instance_uuid"), ["instance_uuid"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_fixed_ips_port_uuid"), ["port_uuid"], unique=False)

    op.create_table(
        "instance_actions_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("action_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=255), nullable=False),
        sa.Column("start_time", TIMESTAMP, nullable=False),
        sa.Column("finish_time", TIMESTAMP, nullable=True),
        sa.Column("result", sa.String(length=255), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.Column("details", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["action_id"],
            ["instance_actions.id"],
            name=op.f("fk_instance_actions_events_action_id_instance_actions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_instance_actions_events")),
        mysql_charset="utf8mb4",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("instance_actions_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_instance_actions_events_action_id"), ["action_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("instance_actions_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instance_actions_events_action_id"))

    op.drop_table("instance_actions_events")
    with op.batch_alter_table("fixed_ips", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_fixed_ips_port_uuid"))
        batch_op.drop_index(batch_op.f("ix_fixed_ips_instance_uuid"))

    op.drop_table("fixed_ips")
    with op.batch_alter_table("ports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_ports_instance_uuid"))

    op.drop_table("ports")
    with op.batch_alter_table("instance_system_metadata", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instance_system_metadata_instance_uuid"))

    op.drop_table("instance_system_metadata")
    with op.batch_alter_table("instance_metadata", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instance_metadata_instance_uuid"))

    op.drop_table("instance_metadata")
    op.drop_table("instance_extra")
    with op.batch_alter_table("instance_actions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instance_actions_request_id"))
        batch_op.drop_index(batch_op.f("ix_instance_actions_instance_uuid"))

    op.drop_table("instance_actions")
    with op.batch_alter_table("bootstrap_changes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bootstrap_changes_instance_uuid"))

    op.drop_table("bootstrap_changes")
    with op.batch_alter_table("instances", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instances_project_id"))
        batch_op.drop_index(batch_op.f("ix_instances_deleted"))

    op.drop_table("instances")
