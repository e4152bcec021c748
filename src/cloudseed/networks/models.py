"""Networks and address allocations (API database).

cloudseed has no Neutron: an operator registers networks (``cloudseed network add``) and each
server gets a port with a MAC and a fixed IP from them. A network's ``mode`` says how the qemu
driver builds it: ``slirp`` (each guest alone on QEMU's user-mode network) or ``bridge`` (the
network's guests on one Linux bridge in a network namespace of its own; docs/qemu-driver.md).
Allocations live here, in the global database, so an address is given to at most one live port
across all cells.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from cloudseed.db.base import MYSQL_TABLE_ARGS, ApiBase, name_column, timestamp, utcnow


class Network(ApiBase):
    __tablename__ = "networks"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[name_column] = mapped_column(unique=True)
    cidr: Mapped[str] = mapped_column(String(64))
    gateway: Mapped[str | None] = mapped_column(String(39), default=None)
    dns_nameservers: Mapped[str] = mapped_column(Text, default="[]")  # JSON list
    mtu: Mapped[int] = mapped_column(Integer, default=1500)
    mode: Mapped[str] = mapped_column(String(16), default="slirp", server_default="slirp")
    # Bridged networks only: guests may reach beyond the network (through the namespace's
    # user-mode uplink), and the metadata proxy also answers at fd00:ec2::254.
    egress: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    ec2_metadata_address: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=false()
    )
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)


class IPAllocation(ApiBase):
    __tablename__ = "ip_allocations"
    __table_args__ = MYSQL_TABLE_ARGS

    id: Mapped[int] = mapped_column(primary_key=True)
    address: Mapped[str] = mapped_column(String(39), unique=True)
    network_uuid: Mapped[str] = mapped_column(String(36), index=True)
    port_uuid: Mapped[str] = mapped_column(String(36), unique=True)
    instance_uuid: Mapped[str] = mapped_column(String(36), index=True)
    created_at: Mapped[timestamp] = mapped_column(default=utcnow)
