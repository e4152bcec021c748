"""The login-time key check end to end, short of a guest: its vendordata parts as the metadata
service serves them (only with ``[keys] login_check``, never on a config drive), and the
AuthorizedKeysCommand itself run against a real metadata service, as sshd runs it.

The command cannot choose its source address, so the service runs behind a metadata proxy
that names the instance (``tests/support/metadata_relay.py``), as a guest's proxy does.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from cloudseed.cells.service import CellDatabases
from cloudseed.configdrive.service import DriveBuilder, read_drive
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from cloudseed.vendordata import login_check
from tests.support import drive_tools
from tests.support.cloud import Cloud
from tests.support.guests import SECRET, Guest, boot
from tests.support.live_keys import PROJECT_KEY, at, delivery, entry, set_keys
from tests.support.metadata_relay import Relay, metadata_relay, vendordata_target
from tests.support.server import running_metadata, with_options
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.databases,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

COMMAND = Path(login_check.__file__).with_name("authorized_keys_command.py")
OPERATOR = "#cloud-config\nbootcmd: [echo operator]\n"
PARTS = login_check.parts()
PROXY = {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET}


def settings_with(base: Settings, tmp_path: Path, *, check: bool, **api: Any) -> Settings:
    static = tmp_path / "vendor_data.json"
    static.write_text(json.dumps({"cloud-init": OPERATOR}))
    settings = with_options(base, "api", vendordata_jsonfile_path=str(static), **api)
    return with_options(settings, "keys", login_check=check)


def test_vendordata_carries_the_parts_only_when_enabled(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, api_db: Database, tmp_path: Path
) -> None:
    guest = boot(api, cloud)
    for check in (False, True):
        settings = settings_with(migrated_settings, tmp_path, check=check)
        with running_metadata(settings, api_db=api_db) as url, guest.client(url) as md:
            vendor = md.get("/openstack/latest/vendor_data.json").json()
            vendor2 = md.get("/openstack/latest/vendor_data2.json").json()
            listing = md.get("/openstack/latest").text.splitlines()
        assert vendor == {"cloud-init": [OPERATOR, *PARTS] if check else OPERATOR}
        # Once is enough: cloud-init 22.4 applies both documents.
        assert vendor2 == {"static": {"cloud-init": OPERATOR}}
        assert "vendor_data.json" in listing and "authorized_keys" not in listing


def test_without_static_json_the_parts_join_the_cloud_init_target(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, api_db: Database, tmp_path: Path
) -> None:
    guest = boot(api, cloud)
    dynamic = "#cloud-config\nruncmd: [echo dynamic]\n"
    with vendordata_target(dynamic) as target:
        settings = settings_with(
            migrated_settings,
            tmp_path,
            check=True,
            vendordata_providers="DynamicJSON",
            vendordata_dynamic_targets=f"cloud-init@{target.url},other@{target.url}",
        )
        with running_metadata(settings, api_db=api_db) as url, guest.client(url) as md:
            assert md.get("/openstack/latest/vendor_data.json").status_code == 404
            vendor2 = md.get("/openstack/latest/vendor_data2.json").json()
    assert vendor2 == {"cloud-init": [dynamic, *PARTS], "other": dynamic}


def test_config_drive_has_the_current_keys_and_never_the_parts(
    api: httpx.Client,
    cloud: Cloud,
    migrated_settings: Settings,
    api_db: Database,
    clean_cell_db: Database,
    tmp_path: Path,
) -> None:
    guest = boot(api, cloud, key_name="key1")
    set_keys(
        clean_cell_db,
        guest.id,
        [
            entry("key1", cloud.key1, expires_at=at(-1)),
            entry("key2", cloud.key2, expires_at=at(3600)),
            entry("team", PROJECT_KEY, source="project"),
        ],
    )
    settings = settings_with(migrated_settings, tmp_path, check=True)
    cells = CellDatabases(api_db)
    builder = DriveBuilder(settings, cells)
    try:
        built = builder.build(guest.id, output=tmp_path / "disk.config")
    finally:
        builder.close()
        cells.dispose()
    _fmt, _label, tree = read_drive(Path(built.path))
    current = {"key2": cloud.key2, "team": PROJECT_KEY}
    for version in ("latest", "2018-08-27", "2012-08-10"):
        meta = json.loads(tree[f"openstack/{version}/meta_data.json"])
        assert meta["public_keys"] == current, version
    ec2 = json.loads(tree["ec2/latest/meta-data.json"])
    assert ec2["public-keys"] == {
        "0": {"openssh-key": cloud.key2},
        "1": {"openssh-key": PROJECT_KEY},
    }
    # A drive's guest may have no metadata service to ask at login: no login check there.
    assert json.loads(tree["openstack/latest/vendor_data.json"]) == {"cloud-init": OPERATOR}
    extracted = tmp_path / "tree"
    for path, content in tree.items():
        (extracted / path).parent.mkdir(parents=True, exist_ok=True)
        (extracted / path).write_bytes(content)
    read = drive_tools.cloud_init_reads(extracted)["datasource"]
    assert read["metadata"]["public_keys"] == current


# -- the AuthorizedKeysCommand, run as sshd runs it ---------------------------------------------


def run_command(base_url: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """The command as installed in a guest: Debian's python3, no environment but the test's
    metadata URL (sshd gives it an environment of its own)."""
    return subprocess.run(
        ["/usr/bin/python3", str(COMMAND), *args],
        env={"CLOUDSEED_TEST_METADATA_URL": base_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def proxied(settings: Settings, api_db: Database, guest: Guest) -> Iterator[Relay]:
    """A metadata service in proxy mode, and a relay that names ``guest`` in front of it."""
    with (
        running_metadata(with_options(settings, "neutron", **PROXY), api_db=api_db) as url,
        metadata_relay(url, instance_id=guest.id, tenant_id="proj", secret=SECRET) as relay,
    ):
        yield relay


def test_the_command_prints_the_keys_of_its_guest(
    api: httpx.Client,
    cloud: Cloud,
    api_db: Database,
    clean_cell_db: Database,
    migrated_settings: Settings,
) -> None:
    guest = boot(api, cloud, key_name="key1")
    set_keys(
        clean_cell_db,
        guest.id,
        [entry("key1", cloud.key1), entry("team", PROJECT_KEY, source="project")],
        keys_generation=2,
    )
    with proxied(migrated_settings, api_db, guest) as relay:
        done = run_command(relay.url, "debian")
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == f"{cloud.key1}\n{PROJECT_KEY}\n"
        (exchange,) = relay.exchanges
        assert exchange.method == "GET"
        assert exchange.path == "/openstack/latest/authorized_keys?user=debian"
        assert exchange.status == 200
        assert exchange.headers.get("user-agent", "").startswith("Python-urllib/")
        # A login name that is not one: the service refuses it, and no key is printed.
        refused = run_command(relay.url, "-oProxyCommand=sh")
        assert (refused.returncode, refused.stdout) == (1, "")
        try:
            wait_until(
                lambda: delivery(clean_cell_db, guest.id) == (2, "login-time check"),
                timeout=5,
                interval=0.01,
                max_interval=0.01,
            )
        except AssertionError:
            raise AssertionError(delivery(clean_cell_db, guest.id)) from None


def test_the_command_fetches_a_token_when_one_is_required(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, api_db: Database
) -> None:
    guest = boot(api, cloud, key_name="key1")
    strict = with_options(migrated_settings, "metadata", require_token=True)
    with proxied(strict, api_db, guest) as relay:
        done = run_command(relay.url, "root")
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{cloud.key1}\n", "")
    seen = [(e.method, e.path, e.status) for e in relay.exchanges]
    assert seen == [
        ("GET", "/openstack/latest/authorized_keys?user=root", 401),
        ("PUT", "/latest/api/token", 200),
        ("GET", "/openstack/latest/authorized_keys?user=root", 200),
    ]
    assert relay.exchanges[2].headers["x-aws-ec2-metadata-token"].startswith("v1.")


def test_the_command_prints_nothing_when_it_gets_nothing(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, api_db: Database
) -> None:
    guest = boot(api, cloud, key_name="key1")
    stranger = Guest("00000000-0000-4000-8000-000000000000", "127.0.0.96", "")
    with proxied(migrated_settings, api_db, stranger) as relay:
        done = run_command(relay.url, "root")  # no such instance: 404
        assert (done.returncode, done.stdout, done.stderr) == (1, "", "")
    assert relay.exchanges[0].status == 404
    with proxied(migrated_settings, api_db, guest) as relay:
        url = relay.url
    started = time.monotonic()
    done = run_command(url, "root")  # nobody listens there any more
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "")
    assert time.monotonic() - started < 10
