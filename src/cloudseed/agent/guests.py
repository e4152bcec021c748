"""What the agent hands the driver for a guest (a ``GuestSpec`` built from the server's
record), and what it asks of config drives (``configdrive.service.DriveBuilder`` provides it)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from cloudseed.compute.interfaces import GuestSpec
from cloudseed.servers import records

Files = tuple[tuple[str, bytes], ...]


class BuiltDrive(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def format(self) -> str: ...


class ConfigDrives(Protocol):
    """What operations ask of config drives (``configdrive.service.DriveBuilder``)."""

    def build(
        self,
        uuid: str,
        *,
        admin_pass: str | None = ...,
        files: Files = ...,
        user_data: str | None = ...,
        carry_over: bool = ...,
        record: records.ServerRecord | None = ...,
    ) -> BuiltDrive: ...

    def existing(self, uuid: str) -> tuple[str, str] | None: ...

    def remove(self, uuid: str) -> None: ...


def guest_spec(record: records.ServerRecord, drive: tuple[str, str] | None = None) -> GuestSpec:
    """``drive``: (path, format) of the instance's config drive, when it has one."""
    i = record.instance
    return GuestSpec(
        uuid=i.uuid,
        name=i.display_name,
        hostname=i.hostname,
        image_ref=i.image_ref,
        flavor=record.flavor,
        key_data=i.key_data,
        user_data=i.user_data,
        config_drive=bool(i.config_drive),
        ports=[
            {
                "port_id": p.uuid,
                "mac_address": p.mac_address,
                "network_id": p.network_id,
                "mtu": p.mtu,
                "fixed_ips": [ip.address for ip in ips],
                "network": _network_of(p.network_info),
                "tag": p.tag,
            }
            for p, ips in record.ports
        ],
        config_drive_path=drive[0] if drive else None,
        config_drive_format=drive[1] if drive else "iso9660",
        project_id=i.project_id or "",
        metadata=dict(record.metadata),
    )


def _network_of(network_info: str) -> dict[str, Any]:
    """What a port keeps of its network, for the driver: the subnet, and how the network is
    built (``mode``: a port made before networks had modes is on a ``slirp`` network). Kept
    under its own key: injection reads a port's top-level ``cidr`` as a request for static
    configuration, which the drivers have never asked for."""
    info = json.loads(network_info or "{}")
    return {
        "cidr": info.get("cidr"),
        "gateway": info.get("gateway"),
        "dns_nameservers": list(info.get("dns_nameservers") or ()),
        "mode": info.get("mode") or "slirp",
        "egress": bool(info.get("egress")),
        "ec2_metadata_address": bool(info.get("ec2_metadata_address")),
    }
