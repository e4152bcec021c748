"""cloud-init's own NoCloud datasource on a seed URL or a seed directory: a script, not a module.

    /usr/bin/python3 -I -B cloudinit_nocloud.py url SEED_URL --mac MAC --work DIR
    /usr/bin/python3 -I -B cloudinit_nocloud.py dir SEED_DIR --mac MAC --work DIR

``--lib DIR`` puts DIR first on ``sys.path``: another cloud-init's ``cloudinit`` package than the
system's (trixie's, tests/support/cloudinit_trixie.py).

Prints one JSON object (bytes as ``{"base64": ...}``):

- ``version``: the cloud-init that ran.

- ``read_seeded`` (``url`` only): ``util.read_seeded(SEED_URL)``, what NoCloud fetches.
- ``datasource``: ``get_data()`` of ``DataSourceNoCloudNet`` configured with ``seedfrom:
  SEED_URL`` (``url``; as ``ds=nocloud-net;s=SEED_URL`` would on the kernel command line), or
  of ``DataSourceNoCloud`` whose seed directory holds SEED_DIR's files as ``nocloud/`` (``dir``:
  a CIDATA drive's files, read the way a mounted drive is, without mounting).
- ``network``: the seed's ``network-config`` (the datasource's, or for ``url``, where
  cloud-init 22.4's NoCloudNet does not fetch it, fetched with cloud-init's ``readurl``) parsed
  by cloud-init's ``network_state`` and rendered by its ENI renderer.

What is patched: only what a test host is not. The guest has one NIC, ``enp1s0``, with
``--mac``; DMI and the kernel command line name no datasource; no block device is scanned for
a CIDATA label (the ``dir`` mode's files stand for one).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

# -I leaves the script's own directory off sys.path; the sibling client is plain Python.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cloudinit_client import plain

GUEST_NIC = "enp1s0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("url", "dir"))
    parser.add_argument("seed")
    parser.add_argument("--mac", required=True)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--lib", type=Path)
    args = parser.parse_args()
    if args.lib is not None:
        sys.path.insert(0, str(args.lib))

    from cloudinit import distros, dmi, helpers, net, url_helper, util
    from cloudinit.net import eni, network_state
    from cloudinit.sources import DataSourceNoCloud as nc
    from cloudinit.version import version_string

    args.work.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=args.work / "cloud-init.log", level=logging.DEBUG, force=True)
    nics = {args.mac.lower(): GUEST_NIC}
    net.get_interfaces_by_mac = lambda *_a, **_k: dict(nics)
    network_state.get_interfaces_by_mac = lambda *_a, **_k: dict(nics)
    network_state.find_interface_name_from_mac = lambda mac: nics.get(mac.lower())
    dmi.read_dmi_data = lambda _key: None
    util.get_cmdline = lambda: ""

    paths = helpers.Paths(
        {
            "cloud_dir": str(args.work / "cloud"),
            "run_dir": str(args.work / "run"),
        }
    )
    distro = distros.fetch("debian")("debian", {}, paths)
    out: dict[str, Any] = {"version": version_string()}
    ds_cfg: dict[str, Any] = {"fs_label": None}
    if args.mode == "url":
        out["read_seeded"] = util.read_seeded(args.seed, timeout=5, retries=1)
        ds_cfg["seedfrom"] = args.seed
        cls = nc.DataSourceNoCloudNet
    else:
        seed_dir = Path(paths.seed_dir) / "nocloud"
        seed_dir.mkdir(parents=True)
        for item in Path(args.seed).iterdir():
            (seed_dir / item.name).write_bytes(item.read_bytes())
        cls = nc.DataSourceNoCloud
    ds = cls({"datasource": {"NoCloud": ds_cfg}}, distro, paths)
    found = ds.get_data()
    out["datasource"] = {"get_data": found}
    if found:
        out["datasource"].update(
            {
                "str": str(ds),
                "instance_id": ds.get_instance_id(),
                "local_hostname": ds.metadata.get("local-hostname"),
                "availability_zone": ds.availability_zone,
                "public_keys": ds.get_public_ssh_keys(),
                "userdata_raw": ds.get_userdata_raw(),
                "vendordata_raw": ds.get_vendordata_raw(),
                "network_config": ds.network_config,
            }
        )
    config = ds.network_config if found else None
    if config is None and args.mode == "url":
        response = url_helper.readurl(args.seed + "network-config", timeout=5, retries=1)
        config = util.load_yaml(response.contents)
    if config is not None:
        state = network_state.parse_net_config_data(config)
        out["network"] = {
            "config": config,
            "interfaces": list(state.iter_interfaces()),
            "eni": eni.Renderer()._render_interfaces(state),
        }
    print(json.dumps(plain(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
