"""Instances and everything recorded about them (a cell database).

The guest's view is derived from these rows alone: ``key_name``/``key_data`` and the key pair
snapshot in ``InstanceExtra.keypairs`` are copied at create and rebuild, so deleting a key pair
later changes nothing for existing instances. ``generation`` grows with every change a guest
could see; caches of rendered metadata key on it.
"""

from __future__ import annotations

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.expression import false as sa_false

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    CellBase,
    LongBinary,
    LongText,
    name_column,
    optional_timestamp,
    timestamp,
    utcnow,
)


class Instance(CellBase):
    __tablename__ = "instances"
    __table_args__ = (
        # A project's server list: its live servers, newest first (servers/listing.py), read
        # from the index in order instead of sorting every row of the project per page.
        Index("ix_instances_project_listed", "project_id", "deleted", "created_at", "id"),
        # The scheduler's sums of each host's live instances (servers/quota.py's by_host), read
        # from the index alone; the lookups by host use its first column.
        Index("ix_instances_host_usage", "host", "deleted", "vcpus", "memory_mb", "root_gb"),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    display_name: Mapped[str] = mapped_column(String(255))
    display_description: Mapped[str | None] = mapped_column(String(255), default=None)
    hostname: Mapped[str] = mapped_column(String(255))
    project_id: Mapped[name_column] = mapped_column(index=True)
    user_id: Mapped[name_column]
    image_ref: Mapped[str] = mapped_column(String(255))
    flavor_id: Mapped[str] = mapped_column(String(255))
    vm_state: Mapped[str] = mapped_column(String(255))
    task_state: Mapped[str | None] = mapped_column(String(255), default=None)
    power_state: Mapped[int] = mapped_column(Integer, default=0)
    key_name: Mapped[str | None] = mapped_column(String(255), default=None)
    key_data: Mapped[str | None] = mapped_column(LongText, default=None)
    # Base64 text exactly as the client sent it; decoded only when served to the guest.
    user_data: Mapped[str | None] = mapped_column(LongText, default=None)
    config_drive: Mapped[str] = mapped_column(String(255), default="")
    launch_index: Mapped[int] = mapped_column(Integer, default=0)
    reservation_id: Mapped[str] = mapped_column(String(255))
    availability_zone: Mapped[str | None] = mapped_column(String(255), default=None)
    access_ip_v4: Mapped[str | None] = mapped_column(String(39), default=None)
    access_ip_v6: Mapped[str | None] = mapped_column(String(39), default=None)
    locked: Mapped[bool] = mapped_column(Boolean, default=False)
    # The compute host that owns the guest (chosen by the scheduler at create) and its
    # hypervisor node; None until scheduled. Operations of the instance go to this host.
    host: Mapped[str | None] = mapped_column(String(255), default=None)
    node: Mapped[str | None] = mapped_column(String(255), default=None)
    # The flavor's resources, copied at create like Nova's columns: the scheduler and quota
    # usage sum them without parsing the flavor snapshot. Filled from the snapshot for
    # instances made before they existed (migration cell0014); None without a snapshot.
    vcpus: Mapped[int | None] = mapped_column(Integer, default=None)
    memory_mb: Mapped[int | None] = mapped_column(Integer, default=None)
    root_gb: Mapped[int | None] = mapped_column(Integer, default=None)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
    launched_at: Mapped[optional_timestamp] = mapped_column(default=None)
    terminated_at: Mapped[optional_timestamp] = mapped_column(default=None)
    deleted_at: Mapped[optional_timestamp] = mapped_column(default=None)
    # Soft delete as in Nova: 0 while alive, the row id once deleted.
    # Not indexed alone (migration cell0015): deleted = 0 is nearly every row.
    deleted: Mapped[int] = mapped_column(Integer, default=0)


class InstanceExtra(CellBase):
    """Per-instance documents: the key pair snapshot (Nova's ``instance_extra.keypairs``), the
    flavor as it was at create, and the last fault."""

    __tablename__ = "instance_extra"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), unique=True)
    keypairs: Mapped[str | None] = mapped_column(LongText, default=None)  # JSON list
    flavor: Mapped[str | None] = mapped_column(Text, default=None)  # JSON object
    fault: Mapped[str | None] = mapped_column(Text, default=None)  # JSON object
    # Live keys (2.106). ``keys_generation`` grows with every change of the key set (the
    # server's own keys or its project's); ``keys_boot_generation`` is the set cloud-init
    # applies at first boot (create, rebuild). What the guest is known to hold:
    # ``keys_applied_generation``, and how (``metadata``, ``login-time check``,
    # ``guest agent``); ``keys_failure`` is the last failed delivery (JSON: generation, reason,
    # at); ``keys_pushed`` the public keys the guest agent last confirmed (JSON list), so that
    # a push removes exactly the keys cloudseed put there.
    keys_generation: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    keys_boot_generation: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    keys_applied_generation: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    keys_applied_via: Mapped[str | None] = mapped_column(String(32), default=None)
    keys_applied_at: Mapped[optional_timestamp] = mapped_column(default=None)
    keys_failure: Mapped[str | None] = mapped_column(Text, default=None)
    keys_pushed: Mapped[str | None] = mapped_column(LongText, default=None)
    # GCE's block-project-ssh-keys: this server does not get its project's keys.
    block_project_keys: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )


class InstanceSystemMetadata(CellBase):
    __tablename__ = "instance_system_metadata"
    __table_args__ = (UniqueConstraint("instance_uuid", "key"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    key: Mapped[name_column]
    value: Mapped[str | None] = mapped_column(Text, default=None)


class InstanceMetadata(CellBase):
    """Server metadata (``/servers/{id}/metadata``): user-visible key/value pairs."""

    __tablename__ = "instance_metadata"
    __table_args__ = (UniqueConstraint("instance_uuid", "key"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    key: Mapped[name_column]
    value: Mapped[str] = mapped_column(String(255))


class InstanceTag(CellBase):
    """A server tag (``/servers/{id}/tags``, Nova's 2.26): a string the owner sets, at most 50
    per server (``servers/tags.py`` has Nova's rules). Compared byte-wise on every backend, so
    ``Web`` and ``web`` are two tags everywhere."""

    __tablename__ = "instance_tags"
    __table_args__ = (UniqueConstraint("instance_uuid", "tag"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    # Indexed for the list filters (tags, tags-any, not-tags, not-tags-any).
    tag: Mapped[name_column] = mapped_column(index=True)


class Port(CellBase):
    """A network attachment: what network_data.json describes, and how the metadata service
    recognises a guest by its source address. ``tag`` is the device role tag of the request's
    ``networks`` item (2.32 and 2.42): meta_data.json's ``devices`` lists the tagged ports."""

    __tablename__ = "ports"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    network_id: Mapped[str] = mapped_column(String(36))
    network_name: Mapped[str] = mapped_column(String(255))
    mac_address: Mapped[str] = mapped_column(String(17), unique=True)
    mtu: Mapped[int] = mapped_column(Integer)
    # JSON: subnet cidr, gateway, dns servers, as network_data.json needs them.
    network_info: Mapped[str] = mapped_column(Text)
    tag: Mapped[str | None] = mapped_column(String(60), default=None)


class FixedIP(CellBase):
    """One address of a live port; unique, so an address names at most one instance."""

    __tablename__ = "fixed_ips"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    address: Mapped[str] = mapped_column(String(39), unique=True)
    version: Mapped[int] = mapped_column(Integer)
    port_uuid: Mapped[str] = mapped_column(ForeignKey("ports.uuid"), index=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)


class InstanceAction(CellBase):
    __tablename__ = "instance_actions"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    action: Mapped[str] = mapped_column(String(255))
    request_id: Mapped[str] = mapped_column(String(255), index=True)
    user_id: Mapped[name_column]
    project_id: Mapped[name_column]
    start_time: Mapped[timestamp] = mapped_column(default=utcnow)
    finish_time: Mapped[optional_timestamp] = mapped_column(default=None)
    message: Mapped[str | None] = mapped_column(String(255), default=None)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)


class InstanceActionEvent(CellBase):
    __tablename__ = "instance_actions_events"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    action_id: Mapped[int] = mapped_column(ForeignKey("instance_actions.id"), index=True)
    event: Mapped[str] = mapped_column(String(255))
    start_time: Mapped[timestamp] = mapped_column(default=utcnow)
    finish_time: Mapped[optional_timestamp] = mapped_column(default=None)
    result: Mapped[str | None] = mapped_column(String(255), default=None)
    traceback: Mapped[str | None] = mapped_column(Text, default=None)
    details: Mapped[str | None] = mapped_column(Text, default=None)


class BootstrapChange(CellBase):
    """One change of an instance's key pair or user data: who, when, which request, and the
    old and new value (key name and fingerprint) or digest (user data, which may hold secrets).
    """

    __tablename__ = "bootstrap_changes"
    __table_args__ = (UniqueConstraint("instance_uuid", "version"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    field: Mapped[str] = mapped_column(String(32))  # "key_pair" | "user_data"
    action: Mapped[str] = mapped_column(String(64))
    request_id: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[name_column]
    project_id: Mapped[name_column]
    changed_at: Mapped[timestamp] = mapped_column(default=utcnow)
    old_value: Mapped[str | None] = mapped_column(Text, default=None)
    new_value: Mapped[str | None] = mapped_column(Text, default=None)


class GuestChange(CellBase):
    """The change feed: one row per change of what an instance's guest sees, written in the
    same transaction as the change. Every metadata worker reads it to drop stale documents.

    A row with ``boot`` set is no change: the instance's guest has just begun to boot (a
    build, rebuild, reboot or start finished), so workers load it ahead of its first request."""

    __tablename__ = "guest_changes"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    instance_uuid: Mapped[str] = mapped_column(String(36))
    changed_at: Mapped[timestamp] = mapped_column(default=utcnow, index=True)
    boot: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())


class Operation(CellBase):
    """A background operation (build, rebuild, reboot, stop, start, destroy) as a record.

    Written in the same transaction as the task claim and the values the request applies, so
    an accepted request always has its work queued. A compute agent of ``host`` claims it by
    taking a lease (``lease_owner``, ``lease_expires_at``), renews the lease while it works, and
    records the outcome together with the instance's new state. A lease that runs out means
    its agent died: the next agent of the host resumes the operation (``attempts`` counts the
    tries). ``payload`` is JSON: what the operation applies on success (pending user data, key
    pair) and what it passes in memory to the build (admin password, personality files); the
    secrets are removed from it when the operation ends.
    """

    __tablename__ = "operations"
    __table_args__ = (
        Index("ix_operations_host_state", "host", "state"),
        MYSQL_TABLE_ARGS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    instance_uuid: Mapped[str] = mapped_column(String(36), index=True)
    # build | rebuild | reboot_soft | reboot_hard | stop | start | destroy | keys | delete
    kind: Mapped[str] = mapped_column(String(32))
    host: Mapped[str | None] = mapped_column(String(255), default=None)
    # pending | running | done | failed
    state: Mapped[str] = mapped_column(String(16), default="pending")
    action_id: Mapped[int | None] = mapped_column(Integer, default=None)
    payload: Mapped[str | None] = mapped_column(LongText, default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(255), default=None)
    lease_expires_at: Mapped[optional_timestamp] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
    finished_at: Mapped[optional_timestamp] = mapped_column(default=None)
    # A notice (2.111, servers/notices/): no agent takes the operation before ``not_before``
    # unless its guest acknowledged it (``acknowledged_at``). None: no notice, as before.
    not_before: Mapped[optional_timestamp] = mapped_column(default=None)
    acknowledged_at: Mapped[optional_timestamp] = mapped_column(default=None)


class ConsoleTail(CellBase):
    """The end of a guest's console as its compute agent last stored it, so that every API node
    answers ``os-getConsoleOutput`` (``servers/lifecycle/console_tails.py``): at most the last
    100 KiB the guest printed, zlib-compressed. ``stamp`` is the driver's mark of the console
    when it was read; the agent writes again only when the mark changed."""

    __tablename__ = "console_tails"
    __table_args__ = MYSQL_TABLE_ARGS

    instance_uuid: Mapped[str] = mapped_column(ForeignKey("instances.uuid"), primary_key=True)
    output: Mapped[bytes] = mapped_column(LongBinary)
    stamp: Mapped[str] = mapped_column(String(255))
    updated_at: Mapped[timestamp] = mapped_column(default=utcnow)
