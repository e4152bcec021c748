"""A Nova deployment's databases without Nova, for the drop-in's functional tests: the tables
``cloudseed nova-metadata`` reads (nova_metadata/schema.py) on scratch databases of a backend
(an API database and cell1; cell0 only as a mapping), instances written the way Nova 34
writes them (its serialized objects in ``instance_extra``, its network model in the info
cache, its timestamps), a nova.conf, a stand-in for Neutron and the service itself, a real
process on a loopback port.

The JSON here has the shape Nova's objects give (checked against Nova 34's own rows in
tests/unit/nova_metadata/nova34_golden.json); tests/compat/'s differential test runs the real
Nova instead.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import subprocess
import sys
import threading
import uuid as uuids
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from sqlalchemy import Engine, create_engine, insert, update
from sqlalchemy.engine import make_url

from cloudseed.nova_metadata import schema
from cloudseed.nova_metadata.databases import driver_url
from tests.support import databases
from tests.support.ports import free_port
from tests.support.waiting import wait_until

SECRET = "drop-in-secret"
PROJECT = "6f70656e737461636b206e6f76610000"
USER = "a11ce000000000000000000000000000"
CELL1 = "c0000000-0000-4000-8000-000000000001"
CELL0 = "00000000-0000-0000-0000-000000000000"
IMAGE = "1abce000-0000-4000-8000-000000000001"


def now() -> dt.datetime:
    return schema.utcnow()


def signed(instance_uuid: str, project: str = PROJECT, secret: str = SECRET) -> dict[str, str]:
    """The headers Neutron's metadata proxy sends for an instance."""
    signature = hmac.new(secret.encode(), instance_uuid.encode(), hashlib.sha256).hexdigest()
    return {
        "X-Instance-ID": instance_uuid,
        "X-Tenant-ID": project,
        "X-Instance-ID-Signature": signature,
        "X-Forwarded-For": "10.0.0.5",
    }


def _object(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
        "nova_object.changes": sorted(data),
    }


def keypairs_json(keys: list[tuple[str, str, str]]) -> str:
    """instance_extra.keypairs: a KeyPairList of (name, type, public key)."""
    objects = [
        _object(
            "KeyPair",
            "1.4",
            {"name": n, "user_id": USER, "fingerprint": "00:11", "public_key": k, "type": t},
        )
        for n, t, k in keys
    ]
    return json.dumps(_object("KeyPairList", "1.3", {"objects": objects}))


def flavor_json(name: str) -> str:
    flavor = _object(
        "Flavor",
        "1.2",
        {
            "id": 1,
            "name": name,
            "memory_mb": 512,
            "vcpus": 1,
            "root_gb": 1,
            "ephemeral_gb": 0,
            "flavorid": "1",
            "swap": 0,
            "rxtx_factor": 1.0,
            "vcpu_weight": 0,
            "disabled": False,
            "is_public": True,
            "extra_specs": {},
            "description": None,
        },
    )
    return json.dumps({"cur": flavor, "old": None, "new": None})


def network_info_json(port_id: str, mac: str, address: str, network_id: str) -> str:
    """Nova's network model for one port with one IPv4 DHCP subnet."""
    prefix = address.rsplit(".", 1)[0]
    ip = {"address": address, "type": "fixed", "version": 4, "meta": {}, "floating_ips": []}
    subnet = {
        "cidr": f"{prefix}.0/24",
        "dns": [{"address": f"{prefix}.2", "type": "dns", "version": 4, "meta": {}}],
        "gateway": {"address": f"{prefix}.1", "type": "gateway", "version": 4, "meta": {}},
        "ips": [ip],
        "routes": [],
        "version": 4,
        "meta": {"dhcp_server": f"{prefix}.2"},
    }
    vif = {
        "id": port_id,
        "address": mac,
        "network": {
            "id": network_id,
            "bridge": "br-int",
            "label": "private",
            "subnets": [subnet],
            "meta": {"mtu": 1450, "tunneled": True},
        },
        "type": "ovs",
        "details": {},
        "devname": "tap" + port_id[:11],
        "ovs_interfaceid": port_id,
        "qbh_params": None,
        "qbg_params": None,
        "active": True,
        "vnic_type": "normal",
        "profile": {},
        "preserve_on_delete": False,
        "delegate_create": False,
        "meta": {},
    }
    return json.dumps([vif])


@dataclass
class Instance:
    uuid: str
    address: str
    port_id: str
    name: str


@dataclass
class Neutron:
    """A stand-in for Neutron's API: ports and security groups from memory, the queries Nova
    makes; ``failing`` makes every answer a 503."""

    url: str = ""
    ports: list[dict[str, Any]] = field(default_factory=list)
    groups: dict[str, str] = field(default_factory=dict)  # id -> name
    failing: bool = False
    requests: list[str] = field(default_factory=list)

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        if self.failing:
            return 503, {"NeutronError": {"message": "down"}}
        if path == "/v2.0/ports":
            found = self.ports
            if "device_id" in query:
                found = [p for p in found if p["device_id"] in query["device_id"]]
            for wanted in query.get("fixed_ips", []):
                address = wanted.removeprefix("ip_address=")
                found = [p for p in found if address in p["ips"]]
            if "network_id" in query:
                found = [p for p in found if p["network_id"] in query["network_id"]]
            return 200, {
                "ports": [
                    {
                        "device_id": p["device_id"],
                        "tenant_id": PROJECT,
                        "security_groups": p["groups"],
                    }
                    for p in found
                ]
            }
        if path == "/v2.0/security-groups":
            ids = query.get("id", [])
            return 200, {
                "security_groups": [
                    {"id": i, "name": n} for i, n in self.groups.items() if i in ids
                ]
            }
        if path == "/v2.0/subnets":
            providers = query.get("advanced_service_providers", [])
            networks = {p["network_id"] for p in self.ports if p.get("provider") in providers}
            return 200, {"subnets": [{"network_id": n} for n in sorted(networks)]}
        return 404, {}


@contextmanager
def running_neutron() -> Iterator[Neutron]:
    neutron = Neutron()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            neutron.requests.append(self.path)
            status, body = neutron.answer(parts.path, parse_qs(parts.query))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    neutron.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield neutron
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class NovaDeployment:
    """The databases, the Neutron stand-in and nova.conf of one test."""

    directory: Path
    api_url: str
    cell_url: str  # as the service opens it
    cell_template: str  # what cell_mappings says
    neutron: Neutron
    api: Engine
    cell: Engine
    count: int = 0

    def conf(self, **sections: dict[str, Any]) -> Path:
        """nova.conf for these databases, with ``sections`` ({"api": {"dhcp_domain": ""}})
        over the defaults: proxy mode with SECRET, Neutron at the stand-in."""
        values: dict[str, dict[str, Any]] = {
            "api_database": {"connection": self.api_url},
            "database": {"connection": self.cell_url},
            "neutron": {
                "service_metadata_proxy": True,
                "metadata_proxy_shared_secret": SECRET,
                "auth_type": "none",
                "endpoint_override": self.neutron.url,
            },
            "cloudseed_metadata": {"change_poll_interval_ms": 100},
        }
        for section, options in sections.items():
            values.setdefault(section, {}).update(options)
        text = "".join(
            f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in options.items())
            for section, options in values.items()
        )
        path = self.directory / f"nova-{uuids.uuid4().hex[:6]}.conf"
        path.write_text(text)
        return path

    def add_instance(
        self,
        name: str,
        *,
        keys: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
        user_data: bytes | None = None,
        metadata: dict[str, str] | None = None,
        address: str | None = None,
        groups: tuple[str, ...] = ("sg-default",),
        project: str = PROJECT,
        mapped: bool = True,
        host: str = "compute-1",
        vm_state: str = "active",
    ) -> Instance:
        """An instance as Nova's create writes it (mapped in cell1)."""
        import base64

        self.count += 1
        instance_uuid = str(uuids.uuid4())
        port_id = str(uuids.uuid4())
        address = address or f"10.0.0.{10 + self.count}"
        mac = f"fa:16:3e:00:00:{self.count:02x}"
        stamp = now()
        with self.cell.begin() as c:
            c.execute(
                insert(schema.instances).values(
                    uuid=instance_uuid,
                    created_at=stamp,
                    deleted=0,
                    user_id=USER,
                    project_id=project,
                    image_ref=IMAGE,
                    kernel_id="",
                    ramdisk_id="",
                    hostname=name,
                    display_name=name,
                    launch_index=0,
                    key_name=keys[0][0] if keys else None,
                    key_data=keys[0][2] if keys else None,
                    user_data=base64.b64encode(user_data).decode() if user_data else None,
                    reservation_id=f"r-{self.count:08x}",
                    availability_zone="nova",
                    root_device_name="/dev/vda",
                    host=host,
                    vm_state=vm_state,
                )
            )
            c.execute(
                insert(schema.instance_extra).values(
                    instance_uuid=instance_uuid,
                    created_at=stamp,
                    deleted=0,
                    keypairs=keypairs_json(list(keys)),
                    flavor=flavor_json("m1.tiny"),
                )
            )
            c.execute(
                insert(schema.instance_info_caches).values(
                    instance_uuid=instance_uuid,
                    created_at=stamp,
                    deleted=0,
                    network_info=network_info_json(port_id, mac, address, "net-private"),
                )
            )
            c.execute(insert(schema.instance_id_mappings).values(uuid=instance_uuid, deleted=0))
            for key, value in (metadata or {}).items():
                c.execute(
                    insert(schema.instance_metadata).values(
                        instance_uuid=instance_uuid, key=key, value=value, deleted=0
                    )
                )
            c.execute(
                insert(schema.block_device_mapping).values(
                    instance_uuid=instance_uuid,
                    source_type="image",
                    destination_type="local",
                    device_name="/dev/vda",
                    boot_index=0,
                    deleted=0,
                )
            )
        if mapped:
            with self.api.begin() as a:
                a.execute(
                    insert(schema.instance_mappings).values(
                        instance_uuid=instance_uuid, cell_id=1, project_id=project
                    )
                )
        self.neutron.ports.append(
            {
                "device_id": instance_uuid,
                "ips": [address],
                "groups": list(groups),
                "network_id": "net-private",
                "provider": "lb-1",
            }
        )
        return Instance(instance_uuid, address, port_id, name)

    # -- what Nova's API does to an instance, row by row -------------------------------------

    def save(self, instance: Instance, **values: Any) -> None:
        """Instance.save(): the columns, and updated_at."""
        with self.cell.begin() as c:
            c.execute(
                update(schema.instances)
                .where(schema.instances.c.uuid == instance.uuid)
                .values(updated_at=now(), **values)
            )

    def backdate(self, instance: Instance, seconds_ago: float) -> None:
        """The instance's watched stamps (its updated_at and its block device's created_at)
        put ``seconds_ago`` back: its last write by Nova then."""
        when = now() - dt.timedelta(seconds=seconds_ago)
        with self.cell.begin() as c:
            c.execute(
                update(schema.instances)
                .where(schema.instances.c.uuid == instance.uuid)
                .values(updated_at=when)
            )
            bdm = schema.block_device_mapping
            c.execute(  # updated_at as Nova left it (the table's onupdate would stamp it now)
                update(bdm)
                .where(bdm.c.instance_uuid == instance.uuid)
                .values(created_at=when, updated_at=None)
            )

    def set_metadata(self, instance: Instance, key: str, value: str) -> None:
        """The metadata API's set: a new row, and the instance saved."""
        with self.cell.begin() as c:
            c.execute(
                insert(schema.instance_metadata).values(
                    instance_uuid=instance.uuid, key=key, value=value, deleted=0
                )
            )
        self.save(instance)

    def delete_metadata(self, instance: Instance, key: str) -> None:
        """DELETE /servers/{id}/metadata/{key}: the row soft-deleted, nothing else."""
        table = schema.instance_metadata
        with self.cell.begin() as c:
            c.execute(
                update(table)
                .where(table.c.instance_uuid == instance.uuid, table.c.key == key)
                .values(deleted=table.c.id, deleted_at=now())
            )

    def destroy(self, instance: Instance) -> None:
        """Instance.destroy(): soft-deleted, updated_at untouched."""
        table = schema.instances
        with self.cell.begin() as c:
            c.execute(
                update(table)
                .where(table.c.uuid == instance.uuid)
                .values(deleted=table.c.id, deleted_at=now(), updated_at=table.c.updated_at)
            )


@contextmanager
def nova_deployment(backend: str, directory: Path) -> Iterator[NovaDeployment]:
    """Fresh databases (API and cell1) on ``backend`` with Nova's tables and cell mappings
    (cell1's stored as a template filled from [database] connection on the server
    backends, as deployments store it), and the Neutron stand-in."""
    with ExitStack() as stack:
        api_url = stack.enter_context(databases.scratch_database(backend, str(directory)))
        cell_url = stack.enter_context(databases.scratch_database(backend, str(directory)))
        neutron = stack.enter_context(running_neutron())
        if backend == "sqlite":
            template = cell_url
        else:
            name = make_url(cell_url).database
            template = "{scheme}://{username}@{hostname}:{port}/" + str(name)
        api = create_engine(driver_url(api_url))
        cell = create_engine(driver_url(cell_url))
        stack.callback(api.dispose)
        stack.callback(cell.dispose)
        schema.api.create_all(api)
        schema.cell.create_all(cell)
        with api.begin() as a:
            a.execute(
                insert(schema.cell_mappings),
                [
                    {"id": 2, "uuid": CELL0, "name": "cell0", "database_connection": api_url},
                    {"id": 1, "uuid": CELL1, "name": "cell1", "database_connection": template},
                ],
            )
        yield NovaDeployment(directory, api_url, cell_url, template, neutron, api, cell)


@dataclass
class Service:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return httpx.get(self.url + path, headers=headers, timeout=30)

    def output(self) -> str:
        return self.log.read_text()


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "cloudseed", "nova-metadata", *args]


@contextmanager
def running_service(conf: Path, *more: Path, workers: int = 1) -> Iterator[Service]:
    """``cloudseed nova-metadata`` on a free loopback port until the block ends."""
    port = free_port()
    log = conf.with_suffix(f".{port}.log")
    args = [a for c in (conf, *more) for a in ("--config-file", str(c))]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command(*args, "--listen", f"127.0.0.1:{port}", "--workers", str(workers)),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    service = Service(f"http://127.0.0.1:{port}", process, log)
    try:

        def answering() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the service exited: {service.output()}")
            try:
                return httpx.get(service.url + "/", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(answering, timeout=60, what="the Nova metadata service answering")
        yield service
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
