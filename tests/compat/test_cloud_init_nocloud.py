"""cloud-init's own NoCloud datasource reads a server's NoCloud seed (2.107): from its seed URL,
with nothing else (no proxy, no source address: the metadata service runs in proxy mode here
and the requests carry no proxy headers), and from a ``CIDATA`` drive built by ``cloudseed
configdrive build --format nocloud`` (read back with pycdlib and handed to the datasource as
its seed directory: no mount).

The client is Debian's cloud-init 22.4 under Debian's python3 (tests/support/
cloudinit_nocloud.py). 22.4 reads ``meta-data``, ``user-data`` and ``vendor-data`` from a seed
URL but not ``network-config`` (cloud-init 23.1 and later do): the script fetches it with
cloud-init's ``readurl`` and parses it with cloud-init's ``network_state``, as the datasource
does with the drive's copy. A second test runs Debian 13's cloud-init 25.x (unpacked from
deb.debian.org's package: tests/support/cloudinit_trixie.py) on the seed URL, whose NoCloudNet
fetches ``network-config`` itself. Vendordata is StaticJSON plus a DynamicJSON target named
``cloud-init``: NoCloud has one vendor-data, a MIME multipart of both, which cloud-init's user
data processor splits back into the two cloud-configs.

This runs once, on SQLite (the API and listener on every backend:
tests/functional/test_nocloud_seeds.py).
"""

from __future__ import annotations

import email
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from cloudseed.configdrive.service import read_drive
from cloudseed.settings import Settings
from tests.support import cloudinit_trixie, databases
from tests.support.cloud import Cloud, b64, mv
from tests.support.cloudinit_run import DYNAMIC_VENDORDATA, STATIC_VENDORDATA
from tests.support.guests import Guest, boot
from tests.support.metadata_relay import Target

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

SCRIPT = Path(__file__).parents[1] / "support" / "cloudinit_nocloud.py"
USER_DATA = "#cloud-config\nruncmd: [echo 'seeded by NoCloud é']\n"


@pytest.fixture(scope="session")
def trixie_cloud_init() -> Path:
    """Where trixie's ``cloudinit`` package is unpacked (downloading it if need be)."""
    try:
        return cloudinit_trixie.cloud_init_path()
    except cloudinit_trixie.TrixieUnavailable as exc:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but trixie's cloud-init is unavailable: {exc}")
        pytest.skip(f"trixie's cloud-init cannot be had here: {exc}")


def read_with_cloud_init(
    python: Path, mode: str, seed: str, guest: Guest, work: Path, lib: Path | None = None
) -> Any:
    command = [str(python), "-I", "-B", str(SCRIPT), mode, seed, "--mac", guest.mac]
    command += ["--work", str(work), *(["--lib", str(lib)] if lib else [])]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(work)},
    )
    log = work / "cloud-init.log"
    assert done.returncode == 0, done.stderr[-3000:] + (
        log.read_text()[-3000:] if log.exists() else ""
    )
    return json.loads(done.stdout)


def unb64(value: Any) -> bytes:
    if isinstance(value, dict):
        import base64

        return base64.b64decode(value["base64"])
    assert isinstance(value, str), value
    return value.encode()


def vendordata_parts(raw: bytes) -> list[str]:
    """The parts of a vendor-data, as cloud-init's user data processor takes a MIME one."""
    message = email.message_from_bytes(raw)
    return [
        bytes(part.get_payload(decode=True)).decode()
        for part in message.walk()
        if not part.is_multipart()
    ]


def check_seed(datasource: dict[str, Any], guest: Guest, cloud: Cloud) -> None:
    assert datasource["get_data"] is True
    assert datasource["instance_id"] == guest.id
    assert datasource["local_hostname"] == "vm.novalocal"
    assert datasource["availability_zone"] == "nova"
    assert datasource["public_keys"] == [cloud.key1]
    assert unb64(datasource["userdata_raw"]) == USER_DATA.encode()
    assert vendordata_parts(unb64(datasource["vendordata_raw"])) == [
        STATIC_VENDORDATA,
        DYNAMIC_VENDORDATA,
    ]


def check_network(network: dict[str, Any], guest: Guest) -> None:
    (interface,) = network["interfaces"]
    # Matched by MAC, the guest's own name kept (no set-name).
    assert (interface["name"], interface["mac_address"]) == ("enp1s0", guest.mac)
    (subnet,) = interface["subnets"]
    assert (subnet["type"], subnet["address"], subnet["prefix"]) == ("static", guest.address, 24)
    assert "iface enp1s0 inet static" in network["eni"]
    assert f"address {guest.address}/24" in network["eni"]


def seed_url(api: httpx.Client, guest: Guest, metadata_url: str) -> str:
    """The server's seed URL as a guest on this listener reaches it (the default base is
    169.254.169.254)."""
    r = api.get(f"/v2.1/servers/{guest.id}/nocloud-seed", headers=mv("2.107"))
    assert r.status_code == 200, r.text
    token: str = r.json()["nocloud_seed"]["url"].rstrip("/").rsplit("/", 1)[1]
    return metadata_url + "/nocloud/" + token + "/"


def test_cloud_init_reads_a_seed_url_and_a_cidata_drive(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    target: Target,
    cloud_init: Path,
    migrated_settings: Settings,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64(USER_DATA), availability_zone="nova")
    url = seed_url(api, guest, metadata_url)

    out = read_with_cloud_init(cloud_init, "url", url, guest, tmp_path / "url")
    md, ud, vd = out["read_seeded"][:3]
    assert md["instance-id"] == guest.id
    assert unb64(ud) == USER_DATA.encode()
    assert unb64(vd)  # the multipart, checked through the datasource below
    check_seed(out["datasource"], guest, cloud)
    assert out["datasource"]["str"].startswith("DataSourceNoCloudNet")
    check_network(out["network"], guest)

    # The CIDATA drive of the same server: the same files, read as a mounted drive is.
    static = tmp_path / "vendor_data.json"  # the compat metadata_url fixture's
    env = {
        "CLOUDSEED_API_DATABASE__CONNECTION": migrated_settings.api_database_url,
        "CLOUDSEED_DATABASE__CONNECTION": migrated_settings.cell_database_url,
        "CLOUDSEED_STATE_PATH": str(tmp_path / "cli-state"),
        "CLOUDSEED_API__VENDORDATA_PROVIDERS": "StaticJSON,DynamicJSON",
        "CLOUDSEED_API__VENDORDATA_JSONFILE_PATH": str(static),
        "CLOUDSEED_API__VENDORDATA_DYNAMIC_TARGETS": f"cloud-init@{target.url}",
    }
    drives = {}
    for fmt, filesystem in (("nocloud", "iso9660"), ("nocloud-vfat", "vfat")):
        image = tmp_path / f"{fmt}.img"
        result = CliRunner().invoke(
            cli,
            ["configdrive", "build", guest.id, "--format", fmt, "--output", str(image)],
            env=env,
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        found, label, files = read_drive(image)
        assert (found, label) == (filesystem, "CIDATA")
        assert sorted(files) == ["meta-data", "network-config", "user-data", "vendor-data"]
        drives[fmt] = files
    assert drives["nocloud"] == drives["nocloud-vfat"]
    seed_dir = tmp_path / "cidata"
    seed_dir.mkdir()
    for name, content in drives["nocloud"].items():
        (seed_dir / name).write_bytes(content)
        # The drive holds what the seed URL serves.
        assert httpx.get(url + name).content == content, name

    out = read_with_cloud_init(cloud_init, "dir", str(seed_dir), guest, tmp_path / "dir")
    check_seed(out["datasource"], guest, cloud)
    assert out["datasource"]["network_config"]["version"] == 2
    check_network(out["network"], guest)


def test_cloud_init_25_reads_network_config_from_a_seed_url(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cloud_init: Path,
    trixie_cloud_init: Path,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64(USER_DATA), availability_zone="nova")
    url = seed_url(api, guest, metadata_url)
    served = httpx.get(url + "network-config")
    assert served.status_code == 200, served.text

    out = read_with_cloud_init(cloud_init, "url", url, guest, tmp_path, lib=trixie_cloud_init)
    major, minor = (int(part) for part in out["version"].split(".")[:2])
    assert (major, minor) >= (23, 1), out["version"]
    check_seed(out["datasource"], guest, cloud)
    assert out["datasource"]["str"].startswith("DataSourceNoCloudNet")
    # The datasource's own network config, fetched from the seed URL by cloud-init itself
    # (the script's readurl fallback is for 22.4, which returns None here).
    config = out["datasource"]["network_config"]
    assert config == json.loads(served.content)
    assert config["version"] == 2
    (ethernet,) = config["ethernets"].values()
    assert ethernet["match"] == {"macaddress": guest.mac}
    check_network(out["network"], guest)
