"""cloud-init's own reader code as a client of a metadata service: a script, not a module.

Run it with the interpreter cloud-init is installed for (Debian: ``/usr/bin/python3``, with
cloud-init in /usr/lib/python3/dist-packages); the test suite never imports cloudinit::

    /usr/bin/python3 -I -B cloudinit_client.py BASE_URL --mac MAC --work DIR MODE...

It prints one JSON object, ``{"cloud_init_version": ..., MODE: result, ...}``; bytes appear as
``{"base64": "..."}``. cloud-init's debug log goes to ``DIR/cloud-init.log``.

Modes (each a fresh crawl by cloud-init's code):

- ``openstack-reader``: ``openstack.MetadataReader(BASE_URL).read_v2()`` plus the helpers the
  datasource applies to its result (``convert_vendordata``, ``normalize_pubkey_data``,
  ``convert_net_json``).
- ``openstack-datasource``: the whole ``DataSourceOpenStack.get_data()``.
- ``openstack-consume``: the same, then cloud-init's consumption of the user data and
  vendordata it read (``stages.Init.consume_data``: part handlers, vendor scripts) and the
  configuration its modules would see (``helpers.ConfigMerger``), in the scratch directory.
- ``ec2-helpers``: ``ec2.get_instance_metadata``/``get_instance_userdata`` at 2009-04-04.
- ``ec2-datasource-v1``: ``DataSourceEc2.get_data()`` as on a non-AWS platform (IMDSv1).
- ``ec2-datasource-v2``: the same as on AWS: a session token first (IMDSv2).

What is patched, and why: only what a test host is not. The guest has one NIC with ``--mac``
(cloud-init would look in /sys/class/net); cloud-init 22.4 uses the OpenStack datasource only
when DMI says "OpenStack Nova" (``detect_openstack``); the EC2 platform comes from DMI
(``identify_platform``); and the OpenStack reader crawls the EC2 tree at the hard-wired
169.254.169.254, which is sent to BASE_URL instead. Nothing in cloud-init's HTTP handling,
parsing or conversion is replaced.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sys
from pathlib import Path
from typing import Any

TIMEOUT = 5  # seconds per request
RETRIES = 1


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data; bytes base64-encoded, so that nothing is lost."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("modes", nargs="+", choices=sorted(MODES))
    parser.add_argument("--mac", required=True, help="the guest NIC's MAC address")
    parser.add_argument("--work", required=True, type=Path, help="scratch directory")
    args = parser.parse_args()

    from cloudinit import version  # noqa: I001 (importing cloudinit resets logging)
    from cloudinit import net
    from cloudinit.sources.helpers import ec2, openstack

    args.work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=args.work / "cloud-init.log",
        level=logging.DEBUG,
        force=True,
        format="%(asctime)s %(name)s[%(levelname)s]: %(message)s",
    )

    def read_ec2_metadata(self: Any) -> Any:
        return ec2.get_instance_metadata(
            metadata_address=self.base_path, timeout=self.timeout, retries=self.retries
        )

    openstack.MetadataReader._read_ec2_metadata = read_ec2_metadata
    guest_nics = {args.mac.lower(): "eth0"}
    net.get_interfaces_by_mac = lambda *_args, **_kwargs: dict(guest_nics)

    out: dict[str, Any] = {"cloud_init_version": version.version_string()}
    for mode in args.modes:
        out[mode] = plain(MODES[mode](args.base_url, args.mac.lower(), args.work / mode))
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    return 0


def openstack_reader(base: str, mac: str, work: Path) -> dict[str, Any]:
    from cloudinit import sources
    from cloudinit.sources.helpers import openstack

    reader = openstack.MetadataReader(base, timeout=TIMEOUT, retries=RETRIES)
    result = reader.read_v2()
    return {
        "version": reader._find_working_version(),
        "read_v2": result,
        # What DataSourceOpenStack.get_public_ssh_keys() does with it.
        "public_keys": sources.normalize_pubkey_data(result["metadata"].get("public_keys")),
        "vendordata_raw": sources.convert_vendordata(result.get("vendordata")),
        "vendordata2_raw": sources.convert_vendordata(result.get("vendordata2")),
        "network_config": openstack.convert_net_json(
            result.get("networkdata"), known_macs={mac: "eth0"}
        ),
    }


def _datasource(cls: Any, name: str, base: str, work: Path) -> Any:
    from cloudinit import distros, helpers

    paths = helpers.Paths({"cloud_dir": str(work / "cloud"), "run_dir": str(work / "run")})
    distro = distros.fetch("debian")("debian", {}, paths)
    sys_cfg = {
        "datasource_list": [name],
        "datasource": {
            name: {"metadata_urls": [base], "max_wait": 10, "timeout": TIMEOUT, "retries": RETRIES}
        },
    }
    return cls(sys_cfg, distro, paths)


def openstack_datasource(base: str, mac: str, work: Path) -> dict[str, Any]:
    from cloudinit.sources import DataSourceOpenStack as dso

    if hasattr(dso, "detect_openstack"):  # 22.4; later versions trust datasource_list
        dso.detect_openstack = lambda accept_oracle=False: True
    ds = _datasource(dso.DataSourceOpenStack, "OpenStack", base, work)
    if not ds.get_data():
        return {"get_data": False}
    return {
        "get_data": True,
        "str": str(ds),
        "instance_id": ds.get_instance_id(),
        "local_hostname": ds.metadata.get("local-hostname"),
        "public_keys": ds.get_public_ssh_keys(),
        "userdata_raw": ds.get_userdata_raw(),
        "vendordata_raw": ds.get_vendordata_raw(),
        "vendordata2_raw": ds.vendordata2_raw,
        "network_config": ds.network_config,
        "availability_zone": ds.availability_zone,
        "platform_type": ds.platform_type,
        "subplatform": ds.subplatform,
        "ec2_metadata": ds.ec2_metadata,
        "instance_data_v1": _instance_data_v1(work),
    }


# The keys of the merged configuration openstack-consume reports.
CONSUMED_KEYS = ("allow_public_ssh_keys", "write_files", "runcmd", "bootcmd")


def openstack_consume(base: str, mac: str, work: Path) -> dict[str, Any]:
    from cloudinit import helpers, stages, util
    from cloudinit.sources import DataSourceOpenStack as dso

    if hasattr(dso, "detect_openstack"):  # 22.4; later versions trust datasource_list
        dso.detect_openstack = lambda accept_oracle=False: True
    # stages.Init takes its paths from the system configuration: this run's directory, never
    # /var/lib/cloud.
    paths = {"cloud_dir": str(work / "cloud"), "run_dir": str(work / "run")}
    system = {"system_info": {"paths": paths}}
    stages.fetch_base_config = lambda **_kw: util.mergemanydict([system, util.get_builtin_cfg()])
    (work / "cloud" / "instances").mkdir(parents=True, exist_ok=True)
    ds = _datasource(dso.DataSourceOpenStack, "OpenStack", base, work)
    if not ds.get_data():
        return {"get_data": False}
    init = stages.Init(ds_deps=[])
    init.datasource = ds
    ds.paths = init.paths
    init._reflect_cur_instance()
    init.update()
    init.consume_data()
    merged = helpers.ConfigMerger(
        paths=init.paths, datasource=ds, additional_fns=[], base_cfg={}
    ).cfg
    scripts = Path(init.paths.get_ipath("vendor_scripts"))
    return {
        "get_data": True,
        "vendordata_raw": ds.get_vendordata_raw(),
        "vendordata2_raw": ds.vendordata2_raw,
        "config": {key: merged[key] for key in CONSUMED_KEYS if key in merged},
        "vendor_scripts": (
            {p.name: p.read_text() for p in sorted(scripts.iterdir())} if scripts.is_dir() else {}
        ),
    }


def _instance_data_v1(work: Path) -> Any:
    """What get_data() persisted (run/instance-data.json) for the rest of cloud-init."""
    return json.loads((work / "run" / "instance-data.json").read_text())["v1"]


def ec2_helpers(base: str, mac: str, work: Path) -> dict[str, Any]:
    from cloudinit.sources.helpers import ec2

    return {
        "meta_data": ec2.get_instance_metadata(
            api_version="2009-04-04", metadata_address=base, timeout=TIMEOUT, retries=RETRIES
        ),
        "user_data": ec2.get_instance_userdata(
            api_version="2009-04-04", metadata_address=base, timeout=TIMEOUT, retries=RETRIES
        ),
    }


def _ec2_datasource(platform: str, base: str, work: Path) -> dict[str, Any]:
    from cloudinit.sources import DataSourceEc2 as dse

    dse.identify_platform = lambda: getattr(dse.CloudNames, platform)
    ds = _datasource(dse.DataSourceEc2, "Ec2", base, work)
    if not ds.get_data():
        return {"get_data": False}
    # get_data() has already asked get_instance_id() (for instance-data.json). On AWS each
    # call crawls dynamic/instance-identity again while it is empty, so take its answer
    # from there rather than pay for another crawl.
    instance_data = _instance_data_v1(work)
    return {
        "get_data": True,
        "instance_data_v1": instance_data,
        "cloud_name": ds.cloud_name,
        "api_version": ds._crawled_metadata.get("_metadata_api_version"),
        "used_token": ds._api_token is not None,
        "instance_id": instance_data["instance_id"],
        "public_keys": ds.get_public_ssh_keys(),
        "userdata_raw": ds.get_userdata_raw(),
        "availability_zone": ds.availability_zone,
        "local_hostname": ds.metadata.get("local-hostname"),
        "meta_data": ds.metadata,
    }


def ec2_datasource_v1(base: str, mac: str, work: Path) -> dict[str, Any]:
    return _ec2_datasource("UNKNOWN", base, work)


def ec2_datasource_v2(base: str, mac: str, work: Path) -> dict[str, Any]:
    return _ec2_datasource("AWS", base, work)


MODES = {
    "openstack-reader": openstack_reader,
    "openstack-datasource": openstack_datasource,
    "openstack-consume": openstack_consume,
    "ec2-helpers": ec2_helpers,
    "ec2-datasource-v1": ec2_datasource_v1,
    "ec2-datasource-v2": ec2_datasource_v2,
}

if __name__ == "__main__":
    sys.exit(main())
