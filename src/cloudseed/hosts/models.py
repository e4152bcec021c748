"""Compute services and their hypervisor nodes (a cell database, as in Nova).

One ``Service`` row per compute agent (``binary`` ``nova-compute``, the name clients expect);
the agent writes ``last_seen_up`` with every heartbeat, and a service is up while that is
newer than ``[DEFAULT] service_down_time``. One ``ComputeNode`` per service holds the capacity
the agent reported (vCPUs, RAM, disk) for the scheduler and ``os-hypervisors``.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import (
    MYSQL_TABLE_ARGS,
    CellBase,
    optional_timestamp,
    timestamp,
    utcnow,
)


class Service(CellBase):
    __tablename__ = "services"
    __table_args__ = (UniqueConstraint("host", "binary", "deleted"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    host: Mapped[str] = mapped_column(String(255))
    binary: Mapped[str] = mapped_column(String(255))
    topic: Mapped[str | None] = mapped_column(String(255), default=None)
    availability_zone: Mapped[str] = mapped_column(String(255), default="nova")
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled_reason: Mapped[str | None] = mapped_column(String(255), default=None)
    forced_down: Mapped[bool] = mapped_column(Boolean, default=False)
    report_count: Mapped[int] = mapped_column(Integer, default=0)
    last_seen_up: Mapped[optional_timestamp] = mapped_column(default=None)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
    deleted_at: Mapped[optional_timestamp] = mapped_column(default=None)
    deleted: Mapped[int] = mapped_column(Integer, default=0)


class ComputeNode(CellBase):
    __tablename__ = "compute_nodes"
    __table_args__ = (UniqueConstraint("host", "hypervisor_hostname", "deleted"), MYSQL_TABLE_ARGS)

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    service_id: Mapped[int] = mapped_column(Integer, index=True)
    host: Mapped[str] = mapped_column(String(255))
    hypervisor_hostname: Mapped[str] = mapped_column(String(255))
    hypervisor_type: Mapped[str] = mapped_column(String(255))  # "fake" | "QEMU"
    hypervisor_version: Mapped[int] = mapped_column(Integer, default=0)
    host_ip: Mapped[str | None] = mapped_column(String(39), default=None)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    local_gb: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
    updated_at: Mapped[optional_timestamp] = mapped_column(default=None)
    deleted_at: Mapped[optional_timestamp] = mapped_column(default=None)
    deleted: Mapped[int] = mapped_column(Integer, default=0)
