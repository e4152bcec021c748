"""cloudbase-init, the Windows guest agent, reads cloudseed with its own code.

cloudbase-init 1.1.9 from PyPI, in a venv of its own (tests/support/cloudbase_init.py), runs
its OpenStack readers in a subprocess (tests/support/cloudbase_init_client.py): the HTTP
service (``HttpService``, through a relay that names the instance as Neutron's metadata proxy
does) and the config drive service (``ConfigDriveService``, with cloudbase-init's own Windows
drive manager finding an ISO 9660 and a VFAT drive on "raw disks" that are the image files).
Two guests, booted once for the module:

- ``win``: an RSA key pair (the password is encrypted with it), user data, an admin password
  given at boot, a config drive;
- ``cert``: an x509 key pair made by the API at 2.2 (``openstack keypair create --type
  x509``), what cloudbase-init's WinRM certificate plugin reads as client auth certificates.

The admin password round trip is the one a Windows guest makes: the SetUserPasswordPlugin's
metadata step posts the password encrypted with the guest's first public key to
``openstack/2013-04-04/password``, the owner reads it back with ``GET
/servers/{id}/os-server-password`` and decrypts it with the private key (``nova
get-password``). One reader run covers everything; it runs once, on SQLite.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from cloudseed.configdrive.service import drive_path, read_drive, write_drive
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support import cloudbase_init, databases
from tests.support.cloud import mv
from tests.support.cloudinit_run import guest_relay
from tests.support.guests import Guest, boot
from tests.support.module_cloud import module_cloud

pytestmark = [
    pytest.mark.compat,
    # Only SQLite: overrides the session-wide backend parametrisation for this module.
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

USER_DATA = b"#ps1_sysnative\nWrite-Output 'hello from cloudseed'\n"
ADMIN_PASS = "Boot-time-Pa55"  # given at boot: on the config drive only, as Nova
POSTED_PASSWORD = "Gue5t-chosen-pass!"  # what the guest sets and posts, encrypted
GZIPPED = gzip.compress(USER_DATA, mtime=0)


@dataclass
class Windows:
    win: Guest
    cert: Guest
    rsa_private: rsa.RSAPrivateKey
    rsa_public: str
    x509_pem: str
    read: dict[str, Any]
    server_password: str  # os-server-password after the guest posted
    requests: list[tuple[str, str, int]]  # what the win guest's readers asked over HTTP


def _unavailable(reason: str) -> None:
    if databases.required():
        pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def windows(
    api_url: str,
    api_db: Database,
    cell_db: Database,
    migrated_settings: Settings,
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Windows]:
    missing = cloudbase_init.missing_tools()
    if missing:
        _unavailable(
            f"cloudbase-init's drive readers need {', '.join(missing)} "
            "(Debian: libarchive-tools, mtools)"
        )
    try:
        python = cloudbase_init.cloudbase_init_python()
    except cloudbase_init.CloudbaseInitUnavailable as exc:
        _unavailable(f"cloudbase-init cannot be installed here: {exc}")
    tmp = tmp_path_factory.mktemp("cloudbase-init")
    with module_cloud(
        api_url=api_url,
        api_db=api_db,
        cell_db=cell_db,
        settings=migrated_settings,
        database_url=database_url,
        tmp=tmp,
    ) as world:
        api = world.api
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = (
            private.public_key()
            .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            .decode()
        )
        r = api.post("/v2.1/os-keypairs", json={"keypair": {"name": "rsa", "public_key": public}})
        assert r.status_code == 200, r.text
        r = api.post(
            "/v2.1/os-keypairs",
            json={"keypair": {"name": "winrm", "type": "x509"}},
            headers=mv("2.2"),
        )
        assert r.status_code == 201, r.text
        pem = r.json()["keypair"]["public_key"]

        win = boot(
            api,
            world.cloud,
            key_name="rsa",
            user_data=base64.b64encode(USER_DATA).decode(),
            adminPass=ADMIN_PASS,
            config_drive=True,
        )
        cert = boot(
            api,
            world.cloud,
            key_name="winrm",
            user_data=base64.b64encode(GZIPPED).decode(),
            config_drive=True,
        )
        # The ISO the API built for each guest, and the same tree as a VFAT drive
        # ([DEFAULT] config_drive_format = vfat).
        drives = []
        for name, guest in (("win", win), ("cert", cert)):
            iso = drive_path(migrated_settings, guest.id)
            assert iso.is_file(), f"no config drive for {name}"
            drives.append({"name": f"{name}-iso", "image": str(iso), "format": "iso"})
        _fmt, _label, tree = read_drive(drive_path(migrated_settings, win.id))
        vfat = tmp / "win.vfat"
        write_drive(tree, vfat, "vfat")
        drives.append({"name": "win-vfat", "image": str(vfat), "format": "vfat"})

        with (
            guest_relay(world.metadata_url, win) as win_relay,
            guest_relay(world.metadata_url, cert) as cert_relay,
        ):
            reading = cloudbase_init.read(
                python,
                tmp / "work",
                http=[
                    {"name": "win", "url": win_relay.url, "password": POSTED_PASSWORD},
                    {"name": "cert", "url": cert_relay.url},
                ],
                drives=drives,
            )
        print(f"cloudbase-init {reading.result['version']}: {reading.seconds:.1f} s")
        r = api.get(f"/v2.1/servers/{win.id}/os-server-password")
        assert r.status_code == 200, r.text
        yield Windows(
            win=win,
            cert=cert,
            rsa_private=private,
            rsa_public=public,
            x509_pem=pem,
            read=reading.result,
            server_password=r.json()["password"],
            requests=[(e.method, e.path, e.status) for e in win_relay.exchanges],
        )


def unb64(value: Any) -> bytes:
    assert isinstance(value, dict), value
    return base64.b64decode(value["base64"])


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["win", "win-iso", "win-vfat"])
def test_identity_keys_and_user_data(windows: Windows, source: str) -> None:
    read = windows.read[source]
    assert read["loaded"] is True
    assert read["instance_id"] == windows.win.id
    assert read["host_name"] == "vm.novalocal"
    assert read["public_keys"] == [windows.rsa_public]
    assert read["user_pwd_encryption_key"] == windows.rsa_public
    assert read["client_auth_certs"] == []
    assert unb64(read["user_data"]) == USER_DATA
    assert unb64(read["decoded_user_data"]) == USER_DATA
    assert read["instance_data"]["v1"] == {
        "instance-id": windows.win.id,
        "instance_id": windows.win.id,
        "local-hostname": "vm.novalocal",
        "local_hostname": "vm.novalocal",
        "public_ssh_keys": [windows.rsa_public],
    }


def test_admin_pass_given_at_boot_is_on_the_drives_only(windows: Windows) -> None:
    assert windows.read["win"]["admin_password"] is None
    for source in ("win-iso", "win-vfat"):
        assert windows.read[source]["admin_password"] == ADMIN_PASS
        assert windows.read[source]["admin_username"] is None
    # What cloudbase-init copied off the drives: the whole tree, by both of its routes.
    iso, vfat = windows.read["win-iso"]["files"], windows.read["win-vfat"]["files"]
    assert iso == vfat
    assert {
        "openstack/latest/meta_data.json",
        "openstack/latest/network_data.json",
        "openstack/latest/user_data",
        "ec2/latest/meta-data.json",
    } <= set(iso)


@pytest.mark.parametrize("source", ["win", "win-iso", "win-vfat", "cert", "cert-iso"])
def test_network_config(windows: Windows, source: str) -> None:
    guest = windows.cert if source.startswith("cert") else windows.win
    read = windows.read[source]
    # No legacy template (meta_data's network_config), as Nova without flat_injected: the
    # agent configures the NICs from network_data.json.
    assert read["network_details"] is None
    details = read["network_details_v2"]
    (link,) = details["links"]
    assert link["mac_address"] == guest.mac
    assert link["type"] == "physical"
    assert link["enabled"] is True
    (network,) = details["networks"]
    assert network["link"] == link["id"]
    assert network["address_cidr"] == f"{guest.address}/24"
    assert network["routes"] == [{"network_cidr": "0.0.0.0/0", "gateway": "127.0.0.1"}]
    assert details["services"] == []


@pytest.mark.parametrize("source", ["cert", "cert-iso"])
def test_x509_key_is_a_client_auth_cert(windows: Windows, source: str) -> None:
    read = windows.read[source]
    assert read["instance_id"] == windows.cert.id
    assert read["client_auth_certs"] == [windows.x509_pem.strip()]
    # Gzipped user data is served as given; cloudbase-init decompresses it.
    assert unb64(read["user_data"]) == GZIPPED
    assert unb64(read["decoded_user_data"]) == USER_DATA


def test_password_posted_encrypted_and_read_back(windows: Windows) -> None:
    read = windows.read["win"]
    assert read["can_post_password"] is True
    assert read["password_set_before"] is False
    assert read["first_post"] is True
    assert read["password_set_after"] is True
    assert read["second_post"] is True  # already set: nothing posted again
    assert {status for *_, status in windows.requests} == {200}
    posts = [(m, p, s) for m, p, s in windows.requests if m == "POST"]
    assert posts == [("POST", "/openstack/2013-04-04/password", 200)]
    encrypted = base64.b64decode(windows.server_password)
    assert len(encrypted) == 256  # one RSA-2048 block: the password never went in clear
    clear = windows.rsa_private.decrypt(encrypted, padding.PKCS1v15())
    assert clear.decode() == POSTED_PASSWORD
