"""Seed a real Nova deployment with the instance shapes of the drop-in proof, through Nova's own
objects (run by the Nova venv's interpreter, never by the suite's).

    <nova-venv>/bin/python tests/support/nova_seed.py --config-file DIR/nova.conf \
        --project-id P --user-id U --neutron-file DIR/neutron.json [--cells DIR/cells.json] \
        > shapes.json
    <nova-venv>/bin/python tests/support/nova_seed.py --config-file DIR/nova.conf \
        --project-id P --user-id U --bulk 2000 > uuids.json

It writes, with ``nova.objects`` (Nova's code decides every column, every serialisation of
``instance_extra``): a flavor, key pairs in the API database (ssh and x509, owned by the user,
so the compute API's rebuild can name them), a nova-compute service record, and one instance per
shape in the first non-cell0 cell with its InstanceMapping, RequestSpec, block device mappings,
info cache (Nova's network model), key pairs, device metadata, metadata and system metadata.
The ports and security groups Neutron would hold for them go to ``--neutron-file``, which the
stub Neutron (tests/support/nova_stubs.py) serves. Prints one JSON document: the shapes by name,
each with its uuid, fixed IPv4 address and what it was given.

``--cells FILE`` first makes the schemas and cells of empty databases, as an operator does
with ``nova-manage api_db sync``, ``cell_v2 map_cell0``, ``cell_v2 create_cell`` and ``db
sync``: the API database's schema, then for each cell of FILE (``{"cell0": {"transport_url":
..., "database_connection": ...}, "cell1": ..., ...}``, in that order) its mapping and its
database's schema, through the same calls those commands make (``nova.db.migration.db_sync``,
``CellMapping.create``, ``context.target_cell``). One process instead of seven nova-manage runs,
each of which spent seconds importing Nova.

``--bulk N`` (benchmarks: bench/nova_dropin.py) instead adds N instances of one realistic shape
to a deployment seeded before (its flavor reused, one key pair of its own): one ssh key,
cloud-config user data, two metadata items, one NIC with a fixed IPv4 address on a /16 and a
root disk, in cell1. Their ports are not given to the stub Neutron (only the EC2 tree's
``security-groups`` asks for them). Prints ``{"uuids": [...], "addresses": [...]}``.

This file imports Nova, so the suite's linters and type checker do not read it (pyproject.toml
excludes it); it is our own code and only calls Nova's public object API.
"""

# Nova must patch the standard library before anything else is imported (its own rule).
# ruff: noqa: E402
import argparse
import base64
import datetime
import json
import sys
import uuid

from nova import monkey_patch

monkey_patch.patch(backend="threading")

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.oid import NameOID
from nova import (
    config,
    objects,
)
from nova import context as nova_context
from nova.compute import power_state, vm_states
from nova.db import migration
from nova.network import model as net
from oslo_utils import timeutils

HOST = "peer-compute-1"
ZONE = "az-peer"
IMAGE_ID = "c0ffee00-0000-4000-8000-000000000001"
KERNEL_ID = "c0ffee00-0000-4000-8000-00000000000a"
RAMDISK_ID = "c0ffee00-0000-4000-8000-00000000000b"
SG_DEFAULT = "5ec00000-0000-4000-8000-000000000001"
SG_WEB = "5ec00000-0000-4000-8000-000000000002"
NET_PRIVATE = "ae700000-0000-4000-8000-000000000001"
NET_STORAGE = "ae700000-0000-4000-8000-000000000002"


def _ssh_key(comment):
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return line.decode() + " " + comment


def _x509_cert(common_name):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _fingerprint(public_key):
    # Nova computes fingerprints on import; the metadata API never shows them, so any stable
    # string that looks like one will do here.
    return ":".join(f"{b:02x}" for b in uuid.uuid5(uuid.NAMESPACE_OID, public_key).bytes)


def _keypair(ctxt, user_id, name, kind, public_key):
    kp = objects.KeyPair(
        ctxt,
        name=name,
        user_id=user_id,
        type=kind,
        public_key=public_key,
        fingerprint=_fingerprint(public_key),
    )
    kp.create()
    return kp


def _flavor(ctxt):
    flavor = objects.Flavor(
        ctxt,
        name="m1.peer",
        flavorid="peer-1",
        memory_mb=512,
        vcpus=1,
        root_gb=1,
        ephemeral_gb=1,
        swap=256,
        rxtx_factor=1.0,
        vcpu_weight=0,
        disabled=False,
        is_public=True,
        extra_specs={},
        description=None,
    )
    flavor.create()
    return flavor


def _cell(ctxt, name):
    for mapping in objects.CellMappingList.get_all(ctxt):
        if mapping.name == name:
            return mapping
    raise SystemExit(f"no cell {name}: run nova-manage cell_v2 create_cell first")


def _subnet(cidr, gateway, ips, *, dhcp, dns=(), routes=(), v6_mode=None, floating=()):
    meta = {"dhcp_server": str(gateway).rsplit(".", 1)[0] + ".2"} if dhcp and "." in cidr else {}
    if v6_mode:
        meta["ipv6_address_mode"] = v6_mode
    if dhcp and ":" in cidr:
        meta["enable_dhcp"] = True
    fixed = []
    for address in ips:
        ip = net.FixedIP(address=address)
        for f in floating:
            ip.add_floating_ip(net.IP(address=f, type="floating"))
        fixed.append(ip)
    return net.Subnet(
        cidr=cidr,
        gateway=net.IP(address=gateway, type="gateway"),
        dns=[net.IP(address=d, type="dns") for d in dns],
        ips=fixed,
        routes=[
            net.Route(cidr=r_cidr, gateway=net.IP(address=r_gw, type="gateway"))
            for r_cidr, r_gw in routes
        ],
        **({"meta": meta} if meta else {}),
    )


def _vif(port_id, mac, network_id, label, subnets, mtu=1450, devname=None, injected=False):
    # injected: what nova-compute's [DEFAULT] flat_injected writes in the network's meta.
    meta = {"mtu": mtu, **({"injected": True} if injected else {})}
    network = net.Network(id=network_id, bridge="br-int", label=label, subnets=subnets, meta=meta)
    return net.VIF(
        id=port_id,
        address=mac,
        network=network,
        type="ovs",
        details={"port_filter": True, "connectivity": "l2"},
        devname=devname or ("tap" + port_id[:11]),
        ovs_interfaceid=port_id,
        vnic_type="normal",
        active=True,
        preserve_on_delete=False,
    )


class Seeder:
    def __init__(self, args):
        self.args = args
        self.ctxt = nova_context.get_admin_context()
        self.cell = _cell(self.ctxt, "cell1")
        self.cell2 = _cell(self.ctxt, "cell2")
        self.flavor = _flavor(self.ctxt)
        self.ports = []
        self.shapes = {}
        self.n = 0
        user = args.user_id
        self.ssh = _keypair(self.ctxt, user, "peer-ssh", "ssh", _ssh_key("peer@ssh"))
        self.ssh2 = _keypair(self.ctxt, user, "peer-ssh-2", "ssh", _ssh_key("peer@ssh-2"))
        self.x509 = _keypair(self.ctxt, user, "peer-x509", "x509", _x509_cert("peer-x509"))
        for cell in (self.cell, self.cell2):
            self._compute_service(cell)

    def _compute_service(self, cell):
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            if objects.Service.get_by_host_and_binary(cctxt, HOST, "nova-compute") is None:
                # forced_down: the compute API deletes the instances of a host that is down
                # itself (its "local delete"), instead of casting to a compute that never runs.
                objects.Service(
                    cctxt,
                    host=HOST,
                    binary="nova-compute",
                    topic="compute",
                    report_count=1,
                    forced_down=True,
                ).create()

    def _port(self, instance_uuid, port_id, mac, network_id, ips, groups):
        self.ports.append(
            {
                "id": port_id,
                "device_id": instance_uuid,
                "device_owner": "compute:" + ZONE,
                "mac_address": mac,
                "network_id": network_id,
                "tenant_id": self.args.project_id,
                "project_id": self.args.project_id,
                "fixed_ips": [{"ip_address": ip, "subnet_id": str(uuid.uuid4())} for ip in ips],
                "security_groups": list(groups),
                "port_security_enabled": True,
                "status": "ACTIVE",
            }
        )

    def instance(
        self,
        name,
        *,
        keys=(),
        user_data=None,
        metadata=None,
        password=None,
        config_drive=False,
        nics=None,
        devices=None,
        bdms=(),
        kernel=False,
        groups=(SG_DEFAULT,),
        launch_index=0,
        delete=False,
        hostname=None,
        cell=None,
        numa=None,
    ):
        self.n += 1
        cell = cell or self.cell
        inst_uuid = str(uuid.uuid4())
        if nics is None:
            port = str(uuid.uuid4())
            address = f"10.0.0.{10 + self.n}"
            nics = [
                (
                    _vif(
                        port,
                        f"fa:16:3e:00:00:{self.n:02x}",
                        NET_PRIVATE,
                        "private",
                        [
                            _subnet(
                                "10.0.0.0/24", "10.0.0.1", [address], dhcp=True, dns=["10.0.0.2"]
                            )
                        ],
                    ),
                    [address],
                )
            ]
        network_info = net.NetworkInfo([vif for vif, _ in nics])
        for vif, ips in nics:
            self._port(inst_uuid, vif["id"], vif["address"], vif["network"]["id"], ips, groups)
        system_metadata = {"image_base_image_ref": IMAGE_ID, "image_disk_format": "qcow2"}
        if password is not None:
            for i in range(4):
                system_metadata[f"password_{i}"] = password[i * 255 : (i + 1) * 255]
        keypairs = objects.KeyPairList(objects=list(keys))
        now = timeutils.utcnow()
        with nova_context.target_cell(self.ctxt, cell) as cctxt:
            inst = objects.Instance(
                context=cctxt,
                uuid=inst_uuid,
                project_id=self.args.project_id,
                user_id=self.args.user_id,
                display_name=name,
                hostname=hostname or name,
                host=HOST,
                node=HOST,
                compute_id=None,
                vm_state=vm_states.ACTIVE,
                power_state=power_state.RUNNING,
                task_state=None,
                image_ref=IMAGE_ID,
                kernel_id=KERNEL_ID if kernel else "",
                ramdisk_id=RAMDISK_ID if kernel else "",
                flavor=self.flavor,
                instance_type_id=self.flavor.id,
                memory_mb=self.flavor.memory_mb,
                vcpus=self.flavor.vcpus,
                root_gb=self.flavor.root_gb,
                ephemeral_gb=self.flavor.ephemeral_gb,
                availability_zone=ZONE,
                root_device_name="/dev/vda",
                launched_at=now,
                launch_index=launch_index,
                reservation_id=f"r-{0x5EED0000 + self.n:08x}",
                key_name=keys[0].name if keys else None,
                key_data=keys[0].public_key if keys else None,
                keypairs=keypairs,
                user_data=(base64.b64encode(user_data).decode() if user_data is not None else None),
                metadata=metadata or {},
                system_metadata=system_metadata,
                config_drive="True" if config_drive else "",
                locked=False,
                device_metadata=devices,
                numa_topology=numa,
            )
            inst.info_cache = objects.InstanceInfoCache(network_info=network_info)
            inst.create()
            for bdm in bdms:
                objects.BlockDeviceMapping(cctxt, instance_uuid=inst_uuid, **bdm).create()
        objects.InstanceMapping(
            self.ctxt,
            instance_uuid=inst_uuid,
            cell_mapping=cell,
            project_id=self.args.project_id,
            user_id=self.args.user_id,
            queued_for_delete=False,
        ).create()
        objects.RequestSpec(
            self.ctxt,
            instance_uuid=inst_uuid,
            project_id=self.args.project_id,
            user_id=self.args.user_id,
            flavor=self.flavor,
            image=objects.ImageMeta.from_dict({"id": IMAGE_ID, "properties": {}}),
            num_instances=1,
            availability_zone=ZONE,
            ignore_hosts=None,
            force_hosts=None,
            force_nodes=None,
            scheduler_hints={},
            is_bfv=False,
        ).create()
        if delete:
            with nova_context.target_cell(self.ctxt, cell) as cctxt:
                objects.Instance.get_by_uuid(cctxt, inst_uuid).destroy()
            self.ports = [p for p in self.ports if p["device_id"] != inst_uuid]
        first_ips = [ip for _, ips in nics for ip in ips if "." in ip]
        self.shapes[name] = {
            "uuid": inst_uuid,
            "address": first_ips[0] if first_ips else None,
            "keys": [k.name for k in keys],
            "user_data": user_data is not None,
            "metadata": metadata or {},
            "password": password is not None,
            "config_drive": config_drive,
            "deleted": delete,
        }
        return inst_uuid

    def seed(self):
        root = {
            "source_type": "image",
            "destination_type": "local",
            "image_id": IMAGE_ID,
            "boot_index": 0,
            "device_name": "/dev/vda",
            "delete_on_termination": True,
        }
        self.instance("nokey", bdms=[root])
        self.instance("onekey", keys=[self.ssh], bdms=[root])
        self.instance("x509", keys=[self.x509, self.ssh2], bdms=[root])
        self.instance("drive", keys=[self.ssh], config_drive=True, bdms=[root])
        self.instance(
            "items",
            metadata={"role": "web", "tier": "front", "unicode": "caf\u00e9"},
            user_data=b"#cloud-config\nhostname: items\nruncmd: [[touch, /tmp/ran]]\n",
            bdms=[root],
        )
        port_a, port_b = str(uuid.uuid4()), str(uuid.uuid4())
        nics = [
            (
                _vif(
                    port_a,
                    "fa:16:3e:aa:00:01",
                    NET_PRIVATE,
                    "private",
                    [
                        _subnet(
                            "10.0.0.0/24",
                            "10.0.0.1",
                            ["10.0.0.50"],
                            dhcp=True,
                            dns=["10.0.0.2", "9.9.9.9"],
                            floating=["203.0.113.50"],
                        ),
                        _subnet(
                            "fd00:10::/64",
                            "fd00:10::1",
                            ["fd00:10::50"],
                            dhcp=True,
                            v6_mode="dhcpv6-stateful",
                            dns=["fd00:10::2"],
                        ),
                    ],
                    mtu=1442,
                ),
                ["10.0.0.50", "fd00:10::50"],
            ),
            (
                _vif(
                    port_b,
                    "fa:16:3e:bb:00:02",
                    NET_STORAGE,
                    "storage",
                    [
                        _subnet(
                            "192.168.50.0/24",
                            "192.168.50.1",
                            ["192.168.50.7"],
                            dhcp=False,
                            dns=["192.168.50.3"],
                            routes=[("172.16.0.0/16", "192.168.50.254")],
                        ),
                        _subnet(
                            "2001:db8:50::/64",
                            "2001:db8:50::1",
                            ["2001:db8:50::7"],
                            dhcp=False,
                            routes=[("2001:db8:99::/48", "2001:db8:50::fe")],
                        ),
                    ],
                    mtu=9000,
                ),
                ["192.168.50.7", "2001:db8:50::7"],
            ),
        ]
        self.instance(
            "twonics",
            keys=[self.ssh],
            nics=nics,
            groups=(SG_DEFAULT, SG_WEB),
            kernel=True,
            launch_index=2,
            hostname="two-nics",
            bdms=[
                root,
                {
                    "source_type": "blank",
                    "destination_type": "local",
                    "guest_format": "swap",
                    "device_name": "/dev/vdb",
                    "boot_index": -1,
                    "volume_size": 1,
                    "delete_on_termination": True,
                },
                {
                    "source_type": "blank",
                    "destination_type": "local",
                    "guest_format": None,
                    "device_name": "/dev/vdc",
                    "boot_index": -1,
                    "volume_size": 1,
                    "delete_on_termination": True,
                },
                {
                    "source_type": "volume",
                    "destination_type": "volume",
                    "volume_id": "0e100000-0000-4000-8000-000000000001",
                    "device_name": "/dev/vdd",
                    "boot_index": -1,
                    "delete_on_termination": False,
                },
            ],
        )
        tag_port = str(uuid.uuid4())
        tag_nics = [
            (
                _vif(
                    tag_port,
                    "fa:16:3e:cc:00:03",
                    NET_PRIVATE,
                    "private",
                    [_subnet("10.0.0.0/24", "10.0.0.1", ["10.0.0.60"], dhcp=True)],
                ),
                ["10.0.0.60"],
            )
        ]
        devices = objects.InstanceDeviceMetadata(
            devices=[
                objects.NetworkInterfaceMetadata(
                    mac="fa:16:3e:cc:00:03",
                    bus=objects.PCIDeviceBus(address="0000:00:03.0"),
                    tags=["uplink"],
                    vlan=1000,
                    vf_trusted=True,
                ),
                objects.DiskMetadata(
                    bus=objects.SCSIDeviceBus(address="0:0:0:1"),
                    serial="disk-vol-1",
                    path="/dev/sdb",
                    tags=["database"],
                ),
                objects.DiskMetadata(
                    bus=objects.IDEDeviceBus(address="0:1"),
                    tags=["legacy"],
                ),
            ]
        )
        # Pinned CPUs: meta_data.json's dedicated_cpus (2020-10-14 on) lists them.
        numa = objects.InstanceNUMATopology(
            cells=[
                objects.InstanceNUMACell(
                    id=0, cpuset=set(), pcpuset={3, 1}, memory=256, cpu_policy="dedicated"
                ),
                objects.InstanceNUMACell(
                    id=1, cpuset=set(), pcpuset={6}, memory=256, cpu_policy="dedicated"
                ),
            ]
        )
        self.instance(
            "tagged", keys=[self.ssh], nics=tag_nics, devices=devices, bdms=[root], numa=numa
        )
        # An instance in the second cell: the metadata API finds it through its mapping.
        self.instance(
            "cell2",
            keys=[self.ssh2],
            user_data=b"#cloud-config\n# in cell2\n",
            metadata={"cell": "2"},
            bdms=[root],
            cell=self.cell2,
        )
        self.instance("password", password="s3cr3t-" + "x" * 300, bdms=[root])
        self.injected(root)
        self.instance("deleted", keys=[self.ssh], user_data=b"gone", delete=True, bdms=[root])
        self.instance(
            "rebuildme",
            keys=[self.ssh],
            user_data=b"#!/bin/sh\necho first\n",
            metadata={"before": "1"},
            bdms=[root],
        )
        self.instance("deleteme", bdms=[root])
        self.instance("renameme", bdms=[root])
        self.instance("pwreset", bdms=[root])
        self.instance("pwdropin", bdms=[root])
        self.instance(
            "cloudinit",
            keys=[self.ssh],
            user_data="#cloud-config\nruncmd: [[echo, 'nova user data \u00e9']]\n".encode(),
            metadata={"purpose": "cloud-init"},
            bdms=[root],
        )

    def injected(self, root):
        """Networks built with flat_injected (Nova's injected network template: network_config
        in meta_data.json, /openstack/content/0000): a DHCP subnet (eth0, left out of the
        template), a static IPv4 and IPv6 pair with gateways and DNS (eth1), and a static IPv4
        /31 without gateway or DNS (eth2: netaddr's broadcast of a /31 is None)."""
        nics = []
        for number, (mac, network_id, subnets, ips) in enumerate(
            [
                (
                    "fa:16:3e:ee:00:01",
                    NET_PRIVATE,
                    [_subnet("10.0.0.0/24", "10.0.0.1", ["10.0.0.70"], dhcp=True)],
                    ["10.0.0.70"],
                ),
                (
                    "fa:16:3e:ee:00:02",
                    NET_STORAGE,
                    [
                        _subnet(
                            "192.168.60.0/24",
                            "192.168.60.1",
                            ["192.168.60.7"],
                            dhcp=False,
                            dns=["192.168.60.3", "9.9.9.9"],
                            routes=[("172.16.0.0/16", "192.168.60.254")],
                        ),
                        _subnet(
                            "2001:db8:60::/64",
                            "2001:db8:60::1",
                            ["2001:db8:60::7"],
                            dhcp=False,
                            dns=["2001:db8:60::3"],
                        ),
                    ],
                    ["192.168.60.7", "2001:db8:60::7"],
                ),
                (
                    "fa:16:3e:ee:00:03",
                    NET_STORAGE,
                    [_subnet("192.168.61.4/31", "", ["192.168.61.5"], dhcp=False)],
                    ["192.168.61.5"],
                ),
            ]
        ):
            port = str(uuid.uuid4())
            vif = _vif(port, mac, network_id, f"injected{number}", subnets, injected=True)
            nics.append((vif, ips))
        self.instance("injected", keys=[self.ssh], nics=nics, bdms=[root])

    def direct(self):
        """An instance whose port has the fixed IP 127.0.0.1: the one a metadata API in direct
        mode (no proxy) finds for a request from the loopback address."""
        port = str(uuid.uuid4())
        nics = [
            (
                _vif(
                    port,
                    "fa:16:3e:dd:00:04",
                    NET_PRIVATE,
                    "loop",
                    [
                        _subnet(
                            "127.0.0.0/8",
                            "127.0.0.254",
                            ["127.0.0.1"],
                            dhcp=False,
                            dns=["127.0.0.53"],
                        )
                    ],
                ),
                ["127.0.0.1"],
            )
        ]
        self.instance("direct", keys=[self.ssh], nics=nics, user_data=b"direct mode\n")

    def neutron_document(self):
        return {
            "ports": self.ports,
            "security_groups": [
                {
                    "id": SG_DEFAULT,
                    "name": "default",
                    "tenant_id": self.args.project_id,
                    "project_id": self.args.project_id,
                    "description": "",
                    "security_group_rules": [],
                },
                {
                    "id": SG_WEB,
                    "name": "web",
                    "tenant_id": self.args.project_id,
                    "project_id": self.args.project_id,
                    "description": "http",
                    "security_group_rules": [],
                },
            ],
        }


BULK_USER_DATA = b"""#cloud-config
hostname: bulk
packages: [nginx]
runcmd:
  - [sh, -c, 'echo booted > /var/tmp/booted']
"""


def bulk(args):
    """``args.bulk`` instances of one shape (see the module's docstring); their uuids and
    fixed addresses, in order."""
    ctxt = nova_context.get_admin_context()
    cell = _cell(ctxt, "cell1")
    flavor = objects.Flavor.get_by_flavor_id(ctxt, "peer-1")
    key = _keypair(ctxt, args.user_id, f"bulk-{uuid.uuid4().hex[:8]}", "ssh", _ssh_key("bulk"))
    root = {
        "source_type": "image",
        "destination_type": "local",
        "image_id": IMAGE_ID,
        "boot_index": 0,
        "device_name": "/dev/vda",
        "delete_on_termination": True,
    }
    uuids, addresses = [], []
    with nova_context.target_cell(ctxt, cell) as cctxt:
        for n in range(args.bulk):
            inst_uuid = str(uuid.uuid4())
            address = f"10.1.{n // 250}.{n % 250 + 2}"
            port = str(uuid.uuid4())
            vif = _vif(
                port,
                f"fa:16:3e:{0xB0 | (n >> 16):02x}:{(n >> 8) & 0xFF:02x}:{n & 0xFF:02x}",
                NET_PRIVATE,
                "private",
                [_subnet("10.1.0.0/16", "10.1.0.1", [address], dhcp=True, dns=["10.1.0.2"])],
            )
            inst = objects.Instance(
                context=cctxt,
                uuid=inst_uuid,
                project_id=args.project_id,
                user_id=args.user_id,
                display_name=f"bulk-{n}",
                hostname=f"bulk-{n}",
                host=HOST,
                node=HOST,
                compute_id=None,
                vm_state=vm_states.ACTIVE,
                power_state=power_state.RUNNING,
                task_state=None,
                image_ref=IMAGE_ID,
                kernel_id="",
                ramdisk_id="",
                flavor=flavor,
                instance_type_id=flavor.id,
                memory_mb=flavor.memory_mb,
                vcpus=flavor.vcpus,
                root_gb=flavor.root_gb,
                ephemeral_gb=flavor.ephemeral_gb,
                availability_zone=ZONE,
                root_device_name="/dev/vda",
                launched_at=timeutils.utcnow(),
                launch_index=0,
                reservation_id=f"r-{0xB0000000 + n:08x}",
                key_name=key.name,
                key_data=key.public_key,
                keypairs=objects.KeyPairList(objects=[key]),
                user_data=base64.b64encode(BULK_USER_DATA).decode(),
                metadata={"role": "web", "index": str(n)},
                system_metadata={"image_base_image_ref": IMAGE_ID, "image_disk_format": "qcow2"},
                config_drive="",
                locked=False,
            )
            inst.info_cache = objects.InstanceInfoCache(network_info=net.NetworkInfo([vif]))
            inst.create()
            objects.BlockDeviceMapping(cctxt, instance_uuid=inst_uuid, **root).create()
            objects.InstanceMapping(
                ctxt,
                instance_uuid=inst_uuid,
                cell_mapping=cell,
                project_id=args.project_id,
                user_id=args.user_id,
                queued_for_delete=False,
            ).create()
            uuids.append(inst_uuid)
            addresses.append(address)
    return {"uuids": uuids, "addresses": addresses}


def create_cells(path):
    """The API schema, then each cell's mapping and schema (``--cells``)."""
    with open(path) as cells_file:
        cells = json.load(cells_file)
    migration.db_sync(database="api")
    ctxt = nova_context.get_admin_context()
    for name, cell in cells.items():
        cell_uuid = objects.CellMapping.CELL0_UUID if name == "cell0" else str(uuid.uuid4())
        mapping = objects.CellMapping(ctxt, uuid=cell_uuid, name=name, **cell)
        mapping.create()
        with nova_context.target_cell(ctxt, mapping) as cell_ctxt:
            migration.db_sync(context=cell_ctxt)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--project-id", required=True)
    parser.add_argument("--user-id", required=True)
    parser.add_argument("--neutron-file")
    parser.add_argument("--bulk", type=int, help="add this many instances of one shape")
    parser.add_argument("--cells", help="make the schemas and these cells first (JSON)")
    args = parser.parse_args()
    # init_rpc: Instance.create notifies through oslo.messaging (fake:/ transport).
    config.parse_args(["nova-seed"], default_config_files=[args.config_file], init_rpc=True)
    objects.register_all()
    if args.cells:
        create_cells(args.cells)
    if args.bulk:
        json.dump(bulk(args), sys.stdout)
        return
    if not args.neutron_file:
        parser.error("--neutron-file is required (but with --bulk)")
    seeder = Seeder(args)
    seeder.seed()
    seeder.direct()
    with open(args.neutron_file, "w") as out:
        json.dump(seeder.neutron_document(), out, indent=1)
    json.dump(
        {
            "project_id": args.project_id,
            "user_id": args.user_id,
            "keypairs": {
                kp.name: {"type": kp.type, "public_key": kp.public_key}
                for kp in (seeder.ssh, seeder.ssh2, seeder.x509)
            },
            "shapes": seeder.shapes,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
