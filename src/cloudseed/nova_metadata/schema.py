"""The tables of Nova's databases the drop-in reads (and the few columns it writes), as
SQLAlchemy Core tables: names and types as Nova 34's models declare them
(nova/db/main/models.py, nova/db/api/models.py), only the columns used here.

Nova's rows are soft-deleted: ``deleted`` is 0 while a row lives and its own id once deleted,
with ``deleted_at`` set; ``created_at`` and ``updated_at`` are set by Nova's models on insert
and update (oslo.db's TimestampMixin: naive UTC). The columns the drop-in writes
(``instance_system_metadata`` for passwords, ``instance_id_mappings`` and ``s3_images`` for EC2
ids) carry the same defaults here, so a row written by the drop-in is the row Nova would
have written.

The same tables, created with ``create_all``, are what the functional tests build a Nova
database from when Nova is not installed; the differential test in tests/compat/ runs on the
schema Nova's own migrations made.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.dialects import mysql


def utcnow() -> dt.datetime:
    """Naive UTC, as oslo.utils' timeutils.utcnow() stamps Nova's rows."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


# Nova's MediumText: MEDIUMTEXT on MySQL, TEXT elsewhere.
MediumText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")


def _timestamps() -> list[Column[dt.datetime]]:
    return [
        Column("created_at", DateTime, default=utcnow),
        Column("updated_at", DateTime, onupdate=utcnow),
        Column("deleted_at", DateTime),
    ]


cell = MetaData()

instances = Table(
    "instances",
    cell,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("user_id", String(255)),
    Column("project_id", String(255)),
    Column("image_ref", String(255)),
    Column("kernel_id", String(255)),
    Column("ramdisk_id", String(255)),
    Column("hostname", String(255)),
    Column("launch_index", Integer),
    Column("key_name", String(255)),
    Column("key_data", MediumText),
    Column("user_data", MediumText),
    Column("reservation_id", String(255)),
    Column("availability_zone", String(255)),
    Column("display_name", String(255)),
    Column("root_device_name", String(255)),
    Column("default_ephemeral_device", String(255)),
    Column("default_swap_device", String(255)),
    Column("host", String(255)),
    Column("vm_state", String(255)),
    Column("cleaned", Integer, default=0),
    Index("instances_updated_at_project_id_idx", "updated_at", "project_id"),
    Index("instances_host_deleted_cleaned_idx", "host", "deleted", "cleaned"),
    Index("instances_deleted_created_at_idx", "deleted", "created_at"),
)

instance_extra = Table(
    "instance_extra",
    cell,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("instance_uuid", String(36), nullable=False),
    Column("device_metadata", Text),
    Column("numa_topology", Text),
    Column("flavor", Text),
    Column("keypairs", Text),
    Index("instance_extra_idx", "instance_uuid"),
)

instance_metadata = Table(
    "instance_metadata",
    cell,
    Column("id", Integer, primary_key=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("key", String(255)),
    Column("value", String(255)),
    Column("instance_uuid", String(36)),
    Index("instance_metadata_instance_uuid_idx", "instance_uuid"),
)

instance_system_metadata = Table(
    "instance_system_metadata",
    cell,
    Column("id", Integer, primary_key=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("key", String(255), nullable=False),
    Column("value", String(255)),
    Column("instance_uuid", String(36), nullable=False),
    Index("instance_uuid", "instance_uuid"),
)

instance_info_caches = Table(
    "instance_info_caches",
    cell,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("network_info", MediumText),
    Column("instance_uuid", String(36), nullable=False, unique=True),
)

block_device_mapping = Table(
    "block_device_mapping",
    cell,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("instance_uuid", String(36)),
    Column("source_type", String(255)),
    Column("destination_type", String(255)),
    Column("guest_format", String(255)),
    Column("device_name", String(255)),
    Column("boot_index", Integer),
    Column("delete_on_termination", Boolean, default=False),
    Column("volume_id", String(36)),
    Index("block_device_mapping_instance_uuid_idx", "instance_uuid"),
)

# EC2 ids: a row per instance (made by Nova when it creates one) and per image, numbered by
# the table; the id is what EC2's i-/ami-/aki-/ari-%08x show.
instance_id_mappings = Table(
    "instance_id_mappings",
    cell,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("uuid", String(36), nullable=False),
    Index("ix_instance_id_mappings_uuid", "uuid"),
)

s3_images = Table(
    "s3_images",
    cell,
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_timestamps(),
    Column("deleted", Integer, default=0),
    Column("uuid", String(36), nullable=False),
)

api = MetaData()

cell_mappings = Table(
    "cell_mappings",
    api,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime, default=utcnow),
    Column("updated_at", DateTime, onupdate=utcnow),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("name", String(255)),
    Column("transport_url", Text()),
    Column("database_connection", Text()),
    Column("disabled", Boolean, default=False),
)

instance_mappings = Table(
    "instance_mappings",
    api,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime, default=utcnow),
    Column("updated_at", DateTime, onupdate=utcnow),
    Column("instance_uuid", String(36), nullable=False, unique=True),
    Column("cell_id", Integer),
    Column("project_id", String(255), nullable=False),
    Column("queued_for_delete", Boolean, default=False),
)
