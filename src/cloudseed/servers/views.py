"""Server response bodies, per microversion (Nova's view builder for the fields cloudseed
keeps). Policy-dependent parts take ``admin`` explicitly: administrators see the extended
server attributes (``OS-EXT-SRV-ATTR:*``, including ``user_data`` from 2.3).

GET shows the full view. ``PUT /servers/{id}`` (``updated``) and rebuild (``rebuilt``) show
Nova's limited view below 2.75 and the full one from 2.75 on: the limited view has no
``OS-EXT-AZ``, ``OS-EXT-SRV-ATTR``, ``OS-EXT-STS``, ``OS-SRV-USG`` attributes, no
``config_drive``, ``security_groups`` (absent in the full view too for a server in no group),
``os-extended-volumes:volumes_attached`` nor ``host_status``, addresses without
``OS-EXT-IPS:type``/``OS-EXT-IPS-MAC:mac_addr``, and ``key_name`` only on rebuild from 2.54.
Rebuild adds ``user_data`` from 2.57 (and never the ``OS-EXT-SRV-ATTR:user_data`` of the full
view) and ``adminPass``.

From 2.106 (cloudseed's live keys) every full view also has the fields of ``live_keys``: the
server's keys with their expiry and delivery state; from 2.110 (readiness) its
``bootstrap_status``."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from typing import Any

from cloudseed.servers import states
from cloudseed.servers.creation import pinning, scheduler_hints
from cloudseed.servers.lifecycle import security_groups
from cloudseed.servers.live_keys.delivery import (
    SOURCE_SERVER,
    delivery_of,
    entry_defaults,
    is_expired,
)
from cloudseed.servers.live_keys.sets import fingerprint_sha256
from cloudseed.servers.metadata_options import options as metadata_options
from cloudseed.servers.notices import rules as notice_rules
from cloudseed.servers.readiness import progress as readiness
from cloudseed.servers.records import ServerRecord
from cloudseed.servers.system_metadata import security_group_names
from cloudseed.web.links import links
from cloudseed.web.microversions import APIVersion

V = APIVersion
PROGRESS_STATUSES = {"ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"}
FAULT_STATUSES = {"ERROR", "DELETED"}


def _isotime(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def _strtime(value: Any) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f") if value else None


def listed(uuid: str, name: str, base: str) -> dict[str, Any]:
    """Nova's basic view (``GET /servers``): id, name and links."""
    return {"id": uuid, "name": name, "links": links(base, "servers", uuid)}


def host_id(project_id: str, host: str | None) -> str:
    """Nova's ``hostId``: the host hashed with the project, so projects cannot compare hosts."""
    return hashlib.sha224((project_id + host).encode()).hexdigest() if host else ""


def addresses(record: ServerRecord, *, extended: bool = True) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    for port, ips in record.ports:
        for ip in ips:
            address: dict[str, Any] = {"version": ip.version, "addr": ip.address}
            if extended:
                address["OS-EXT-IPS:type"] = "fixed"
                address["OS-EXT-IPS-MAC:mac_addr"] = port.mac_address
            result.setdefault(port.network_name, []).append(address)
    return result


def _flavor(record: ServerRecord, version: APIVersion, base: str) -> dict[str, Any]:
    flavor = record.flavor
    if version >= V(2, 47):
        return {
            "vcpus": flavor.vcpus if flavor else None,
            "ram": flavor.memory_mb if flavor else None,
            "disk": flavor.root_gb if flavor else None,
            "ephemeral": flavor.ephemeral_gb if flavor else 0,
            "swap": flavor.swap if flavor else 0,
            "original_name": flavor.name if flavor else None,
        }
    root = base.removesuffix("/v2.1")
    # An instance without a recorded flavor shows "None", as it always has.
    flavorid = flavor.flavorid if flavor else str(None)
    return {
        "id": flavorid,
        "links": [{"rel": "bookmark", "href": f"{root}/flavors/{flavorid}"}],
    }


def show(
    record: ServerRecord,
    version: APIVersion,
    base: str,
    *,
    admin: bool,
    with_server_groups: bool = True,
    with_user_data: bool = True,
    limited: bool = False,
    with_key_name: bool = True,
) -> dict[str, Any]:
    """The full view; ``limited``: Nova's limited view (see the module's docstring)."""
    i = record.instance
    status = states.status_of(i.vm_state, i.task_state)
    server = _common(record, version, base, status=status, limited=limited)
    if not limited:
        server.update(_extended(record))
    if with_key_name:
        server["key_name"] = i.key_name
    if status in FAULT_STATUSES and record.fault:
        server["fault"] = _fault(record.fault, admin=admin)
    if status in PROGRESS_STATUSES:
        server["progress"] = 100 if status == "ACTIVE" else 0
    if admin and not limited:
        server.update(_admin_only(record, version, with_user_data=with_user_data))
    server.update(
        _by_microversion(
            record, version, admin=admin, limited=limited, with_server_groups=with_server_groups
        )
    )
    return {"server": server}


def _common(
    record: ServerRecord, version: APIVersion, base: str, *, status: str, limited: bool
) -> dict[str, Any]:
    """The fields of every view, limited or full, for every caller."""
    i = record.instance
    root = base.removesuffix("/v2.1")
    return {
        "accessIPv4": i.access_ip_v4 or "",
        "accessIPv6": i.access_ip_v6 or "",
        "addresses": addresses(record, extended=not limited),
        "created": _isotime(i.created_at),
        "flavor": _flavor(record, version, base),
        "hostId": host_id(i.project_id, i.host),
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
    }


def _extended(record: ServerRecord) -> dict[str, Any]:
    """Nova's extension attributes of the full view (zone, states, usage times, groups)."""
    i = record.instance
    fields: dict[str, Any] = {
        "OS-EXT-AZ:availability_zone": pinning.current_zone(i.availability_zone),
        "config_drive": i.config_drive,
        "OS-SRV-USG:launched_at": _strtime(i.launched_at),
        "OS-SRV-USG:terminated_at": _strtime(i.terminated_at),
        "OS-EXT-STS:task_state": i.task_state,
        "OS-EXT-STS:vm_state": i.vm_state,
        "OS-EXT-STS:power_state": i.power_state,
        "os-extended-volumes:volumes_attached": [],
    }
    groups = _security_groups(record)
    if groups:  # Nova leaves the key out for a server in no group
        fields["security_groups"] = [{"name": name} for name in groups]
    return fields


def _fault(fault: dict[str, Any], *, admin: bool) -> dict[str, Any]:
    shown = {
        "code": fault["code"],
        "created": fault["created"][:19] + "Z",
        "message": fault["message"],
    }
    if admin:
        shown["details"] = fault.get("details", "")
    return shown


def _admin_only(
    record: ServerRecord, version: APIVersion, *, with_user_data: bool
) -> dict[str, Any]:
    """``OS-EXT-SRV-ATTR``: where the server runs and how it was launched, for administrators."""
    i = record.instance
    fields: dict[str, Any] = {
        "OS-EXT-SRV-ATTR:host": i.host,
        "OS-EXT-SRV-ATTR:instance_name": f"instance-{i.id:08x}",
        "OS-EXT-SRV-ATTR:hypervisor_hostname": i.node,
    }
    if version >= V(2, 3):
        fields.update(
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
            fields["OS-EXT-SRV-ATTR:user_data"] = i.user_data
    return fields


def _by_microversion(
    record: ServerRecord,
    version: APIVersion,
    *,
    admin: bool,
    limited: bool,
    with_server_groups: bool,
) -> dict[str, Any]:
    """The fields later microversions added, each from the version that added it."""
    i = record.instance
    fields: dict[str, Any] = {}
    if version >= V(2, 9):
        fields["locked"] = i.locked
    if version >= V(2, 16) and admin and not limited:
        fields["host_status"] = "UP" if i.host else ""
    if version >= V(2, 19):
        fields["description"] = i.display_description
    if version >= V(2, 26):
        fields["tags"] = list(record.tags)
    if version >= V(2, 63):
        fields["trusted_image_certificates"] = None
    if version >= V(2, 71) and with_server_groups:
        fields["server_groups"] = []
    if version >= V(2, 73):
        fields["locked_reason"] = record.system_metadata.get("locked_reason")
    if version >= V(2, 90) and (limited or not admin):
        fields["OS-EXT-SRV-ATTR:hostname"] = i.hostname
    if version >= V(2, 96):
        fields["pinned_availability_zone"] = record.system_metadata.get(pinning.PINNED_AZ)
    if version >= V(2, 100):
        fields["scheduler_hints"] = scheduler_hints.shown(record.system_metadata)
    if version >= LIVE_KEYS_SINCE:
        fields.update(live_keys(record))
    if version >= METADATA_OPTIONS_SINCE:
        # What the server sets, null where it follows the cloud (servers/metadata_options/).
        options = metadata_options.of_system_metadata(record.system_metadata)
        fields["metadata_options"] = options.body()
    if version >= BOOTSTRAP_STATUS_SINCE:
        fields["bootstrap_status"] = bootstrap_status(record)
    if version >= notice_rules.NOTICES_SINCE:  # servers/notices/
        stored = record.system_metadata.get(notice_rules.SYSTEM_METADATA_KEY)
        fields["scheduled_events"] = notice_rules.api_view(notice_rules.parse_stored(stored))
    return fields


def _security_groups(record: ServerRecord) -> list[str]:
    return security_group_names(record.system_metadata, has_ports=bool(record.ports))


# Security group ids: stable per project and name (cloudseed's groups have no rows).
_GROUP_IDS = uuid.UUID("3e0b1c6a-52d4-4f0e-9a57-3c5fe1c6a0d2")


def security_groups_detailed(record: ServerRecord) -> list[dict[str, Any]]:
    """``/servers/{id}/os-security-groups``: Nova's security group bodies, without rules (there
    is no firewall), sorted by project and name as Nova sorts them."""
    project = record.instance.project_id
    return [
        {
            "id": str(uuid.uuid5(_GROUP_IDS, f"{project}/{name}")),
            "name": name,
            "description": security_groups.KNOWN.get(name),
            "tenant_id": project,
            "rules": [],
        }
        for name in sorted(_security_groups(record))
    ]


METADATA_OPTIONS_SINCE = V(2, 109)
BOOTSTRAP_STATUS_SINCE = V(2, 110)


def bootstrap_status(record: ServerRecord) -> dict[str, Any]:
    """2.110: the boot as the guest reported it (servers/readiness/progress.py)."""
    i = record.instance
    stored = record.system_metadata.get(readiness.PROGRESS_KEY)
    return readiness.shown(stored, readiness.generation_of(i.launched_at, i.task_state))


# --- live keys (2.106) ---------------------------------------------------------------------------

LIVE_KEYS_SINCE = V(2, 106)
# cloudseed cannot see whether a guest with a config drive also reaches the metadata service
# (many do): the state says what such a guest depends on, rather than guessing.
CONFIG_DRIVE_NOTE = (
    "This server has a config drive: if its guest cannot reach the metadata service, key "
    "changes reach it only through the guest agent (qemu-guest-agent)."
)


def live_keys(record: ServerRecord, now: dt.datetime | None = None) -> dict[str, Any]:
    """The 2.106 fields: the server's own key names, its opt-out of project keys, every key
    with its fingerprints, expiry and delivery state, and the delivery of the set. A key is
    ``applied`` only once the guest is known to hold the generation that brought it."""
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    entries = [entry_defaults(e) for e in record.keypairs]
    delivery = delivery_of(record.extra)

    def key_delivery(entry: dict[str, Any]) -> dict[str, Any]:
        state = delivery.key_state(entry["since_generation"])
        return {
            "state": state,
            "via": delivery.via if state == "applied" else None,
            "reason": delivery.reason if state == "failed" else None,
        }

    return {
        "key_names": [e["name"] for e in entries if e["source"] == SOURCE_SERVER],
        "block_project_keys": bool(record.extra.block_project_keys),
        "keys": [
            {
                "name": e["name"],
                "user_id": e.get("user_id"),
                "type": e["type"],
                "fingerprint": e.get("fingerprint"),
                "fingerprint_sha256": fingerprint_sha256(e),
                "expires_at": e["expires_at"],
                "expired": is_expired(e, now),
                "source": e["source"],
                "delivery": key_delivery(e),
            }
            for e in entries
        ],
        "key_delivery": {
            "generation": delivery.generation,
            "applied_generation": delivery.applied_generation,
            "state": delivery.state,
            "via": delivery.via,
            "reason": delivery.reason,
            "applied_at": _isotime(delivery.applied_at),
            "note": CONFIG_DRIVE_NOTE if record.instance.config_drive else None,
        },
    }


FULL_UPDATE_AND_REBUILD_SINCE = V(2, 75)
REBUILD_KEY_NAME_SINCE = V(2, 54)
REBUILD_USER_DATA_SINCE = V(2, 57)


def updated(record: ServerRecord, version: APIVersion, base: str, *, admin: bool) -> dict[str, Any]:
    """``PUT /servers/{id}``'s body."""
    full = version >= FULL_UPDATE_AND_REBUILD_SINCE
    return show(record, version, base, admin=admin, limited=not full, with_key_name=full)


def rebuilt(
    record: ServerRecord, version: APIVersion, base: str, *, admin: bool, admin_password: str
) -> dict[str, Any]:
    """The rebuild action's body."""
    view = show(
        record,
        version,
        base,
        admin=admin,
        limited=version < FULL_UPDATE_AND_REBUILD_SINCE,
        with_key_name=version >= REBUILD_KEY_NAME_SINCE,
        with_user_data=False,
    )
    if version >= REBUILD_USER_DATA_SINCE:
        view["server"]["user_data"] = record.instance.user_data
    view["server"]["adminPass"] = admin_password
    return view
