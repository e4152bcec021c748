"""cloud-init's own phone_home module reports a guest's host keys to a running cloudseed.

The module is Debian's cloud-init 22.4 (``cc_phone_home.handle``), run by Debian's
``/usr/bin/python3`` in a subprocess (``tests/support/cloudinit_phone_home.py``, which says what
it patches: the instance id, the host names and where the key files are). cloud-init cannot
choose its source address, so the metadata service runs in proxy mode behind the relay of
tests/support/cloudinit_run.py, which names the instance in signed headers as Neutron's
metadata proxy does. Host keys are made with ``ssh-keygen -A`` when it is there, else with
cryptography. SQLite only, as the other cloud-init tests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from cloudseed.hostkeys.key_lines import parse_host_key
from tests.support import keys
from tests.support.cloud import Cloud
from tests.support.cloudinit_run import guest_relay
from tests.support.guests import Guest, boot

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

SCRIPT = Path(__file__).parents[1] / "support" / "cloudinit_phone_home.py"
TIMEOUT = 120


def host_keys(directory: Path) -> dict[str, str]:
    """``ssh_host_*_key.pub`` files in ``directory``, as a fresh guest has them."""
    directory.mkdir(parents=True)
    keygen = shutil.which("ssh-keygen")
    if keygen is not None:
        root = directory / "root"
        (root / "etc" / "ssh").mkdir(parents=True)
        subprocess.run([keygen, "-A", "-f", str(root)], check=True, capture_output=True)
        for pub in (root / "etc" / "ssh").glob("*.pub"):
            shutil.copy(pub, directory / pub.name)
    else:
        for name, line in (
            ("ssh_host_rsa_key.pub", keys.rsa_public()),
            ("ssh_host_ecdsa_key.pub", keys.ecdsa_public()),
            ("ssh_host_ed25519_key.pub", keys.ed25519_public("root@vm")),
        ):
            (directory / name).write_text(line + " root@vm\n")
    return {p.name: p.read_text() for p in sorted(directory.glob("*.pub"))}


def phone_home(python: Path, url: str, guest: Guest, key_dir: Path, work: Path) -> None:
    argv = [
        str(python),
        "-I",
        "-B",
        str(SCRIPT),
        url,
        "--instance-id",
        guest.id,
        "--hostname",
        "vm",
        "--fqdn",
        "vm.novalocal",
        "--keys",
        str(key_dir),
        "--work",
        str(work),
    ]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=work.parent,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(work.parent)},
    )
    log = work / "cloud-init.log"
    assert result.returncode == 0, (result.stderr, log.read_text() if log.exists() else "")
    assert json.loads(result.stdout)["cloud_init_version"]


def test_cloud_init_phone_home_reports_the_host_keys(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cloud_init: Path,
    tmp_path: Path,
) -> None:
    guest, other = boot(api, cloud), boot(api, cloud)
    found = host_keys(tmp_path / "keys")
    with guest_relay(metadata_url, guest) as relay:
        phone_home(
            cloud_init,
            f"{relay.url}/openstack/latest/phone_home",
            guest,
            tmp_path / "keys",
            tmp_path / "one",
        )
        # The stock module again (a second run of the final stage): kept as a repeat.
        phone_home(
            cloud_init,
            f"{relay.url}/openstack/latest/phone_home",
            guest,
            tmp_path / "keys",
            tmp_path / "two",
        )
    (first, second) = [e for e in relay.exchanges if e.method == "POST"]
    assert (first.path, first.status, second.status) == ("/openstack/latest/phone_home", 200, 200)
    assert first.headers["content-type"] == "application/x-www-form-urlencoded"
    assert first.headers["user-agent"].startswith("Cloud-Init/")
    r = api.get(f"/v2.1/servers/{guest.id}/host-keys")
    shown = r.json()["host_keys"]
    assert sorted(e["key"] for e in shown) == sorted(parse_host_key(k).key for k in found.values())
    assert {e["source"] for e in shown} == {"phone_home"}
    # A guest that names another instance in the URL template or the form reports nothing
    # for it: the relay (the proxy) says who is asking.
    with guest_relay(metadata_url, other) as relay:
        bad = Guest(guest.id, other.address, other.mac)  # the form says: the first guest
        phone_home(
            cloud_init,
            f"{relay.url}/openstack/latest/phone_home",
            bad,
            tmp_path / "keys",
            tmp_path / "bad",
        )
    assert [e.status for e in relay.exchanges if e.method == "POST"] == [403]
    assert api.get(f"/v2.1/servers/{other.id}/host-keys").json() == {"host_keys": []}
