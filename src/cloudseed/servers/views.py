"""Server response bodies, per microversion (Nova's view builder for the fields cloudseed
keeps). Policy-dependent parts take ``admin`` explicitly: administrators see the extended
server attributes (``OS-EXT-SRV-ATTR:*``, including ``user_data`` from 2.3)."""

from __future__ import annotations

import hashlib
from typing import Any

from cloudseed.servers import states
from cloudseed.servers.records import ServerRecord
from cloudseed.web.links import links
from cloudseed.web.microversions import APIVersion

V = APIVersion
PROGRESS_STATUSES = {"ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"}
FAULT_STATUSES = {"ERROR", "DELETED"}


def _isotime(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _strtime(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if value else None


def basic(record: ServerRecord, base: str) -> dict[str, Any]:
    i = record.instance
    return {"id": i.uuid, "name": i.display_name, "links": links(base, "servers", i.uuid)}


def addresses(record: ServerRecord) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    for port, ips in record.ports:
        for ip in ips:
            result.setdefault(port.network_name, []).append(
                {
                    "version": ip.version,
                    "addr": ip.address,
                    "OS-EXT-IPS:type": "fixed",
                    "OS-EXT-IPS-MAC:mac_addr": port.mac_address,
                }
            )
    return result


def _flavor(record: ServerRecord, version: APIVersion, base: str) -> dict[str, Any]:
    flavor = record.flavor
    if version >= V(2, 47):
        return {
            "vcpus": flavor.get("vcpus"),
            "ram": flavor.get("ram"),
            "disk": flavor.get("disk"),
            "ephemeral": flavor.get("ephemeral", 0),
            "swap": flavor.get("swap", 0),
            "original_name": flavor.get("name"),
        }
    root = base.removesuffix("/v2.1")
    return {
        "id": str(flavor.get("id")),
        "links": [{"rel": "bookmark", "href": f"{root}/flavors/{flavor.get('id')}"}],
    }


def show(
    record: ServerRecord,
    version: APIVersion,
    base: str,
    *,
    admin: bool,
    with_server_groups: bool = True,
    with_user_data: bool = True,
) -> dict[str, Any]:
    i = record.instance
    status = states.status_of(i.vm_state, i.task_state)
    root = base.removesuffix("/v2.1")
    server: dict[str, Any] = {
        "accessIPv4": i.access_ip_v4 or "",
        "accessIPv6": i.access_ip_v6 or "",
        "addresses": addresses(record),
        "created": _isotime(i.created_at),
        "flavor": _flavor(record, version, base),
        "hostId": hashlib.sha224((i.project_id + i.host).encode()).hexdigest() if i.host else "",
        "id": i.uuid,
        "image": {
            "id": i.image_ref,
            "links": [{"rel": "bookmark", "href": f"{root}/images/{i.image_ref}"}],
        },
        "links": links(base, "servers", i.uuid),
        "metadata": dict(record.metadata),
        "name": i.display_name,
        "status": status,
        "tenant_id": i.project_id,
        "user_id": i.user_id,
        "updated": _isotime(i.updated_at or i.created_at),
        "OS-DCF:diskConfig": "MANUAL",
        "OS-EXT-AZ:availability_zone": i.availability_zone or "nova",
        "config_drive": i.config_drive,
        "key_name": i.key_name,
        "OS-SRV-USG:launched_at": _strtime(i.launched_at),
        "OS-SRV-USG:terminated_at": _strtime(i.terminated_at),
        "security_groups": [{"name": "default"}],
        "OS-EXT-STS:task_state": i.task_state,
        "OS-EXT-STS:vm_state": i.vm_state,
        "OS-EXT-STS:power_state": i.power_state,
        "os-extended-volumes:volumes_attached": [],
    }
    if status in FAULT_STATUSES and record.fault:
        fault = record.fault
        server["fault"] = {
            "code": fault["code"],
            "created": fault["created"][:19] + "Z",
            "message": fault["message"],
        }
        if admin:
            server["fault"]["details"] = fault.get("details", "")
    if status in PROGRESS_STATUSES:
        server["progress"] = 100 if status == "ACTIVE" else 0
    if admin:
        server.update(
            {
                "OS-EXT-SRV-ATTR:host": i.host,
                "OS-EXT-SRV-ATTR:instance_name": f"instance-{i.id:08x}",
                "OS-EXT-SRV-ATTR:hypervisor_hostname": i.node,
            }
        )
        if version >= V(2, 3):
            server.update(
                {
                    "OS-EXT-SRV-ATTR:hostname": i.hostname,
                    "OS-EXT-SRV-ATTR:kernel_id": "",
                    "OS-EXT-SRV-ATTR:launch_index": i.launch_index,
                    "OS-EXT-SRV-ATTR:ramdisk_id": "",
                    "OS-EXT-SRV-ATTR:reservation_id": i.reservation_id,
                    "OS-EXT-SRV-ATTR:root_device_name": "/dev/vda",
                }
            )
            if with_user_data:
                server["OS-EXT-SRV-ATTR:user_data"] = i.user_data
    if version >= V(2, 9):
        server["locked"] = i.locked
    if version >= V(2, 16) and admin:
        server["host_status"] = "UP" if i.host else ""
    if version >= V(2, 19):
        server["description"] = i.display_description
    if version >= V(2, 26):
        server["tags"] = []
    if version >= V(2, 63):
        server["trusted_image_certificates"] = None
    if version >= V(2, 71) and with_server_groups:
        server["server_groups"] = []
    if version >= V(2, 73):
        server["locked_reason"] = None
    if version >= V(2, 90) and not admin:
        server["OS-EXT-SRV-ATTR:hostname"] = i.hostname
    if version >= V(2, 96):
        server["pinned_availability_zone"] = None
    if version >= V(2, 100):
        server["scheduler_hints"] = {}
    return {"server": server}
