"""Ignition, the first-boot agent of Fedora CoreOS and Flatcar, fetches its config from cloudseed.

Debian's ``ignition`` (2.14) runs its fetch stage on the ``openstack`` platform, each run in
namespaces of its own (tests/support/ignition.py): against the metadata service, reached at
169.254.169.254:80 in a network namespace where a relay names the instance as Neutron's
metadata proxy does, and against the config drive the API built (ISO 9660) and the same tree
as a VFAT drive, with no network at all. The config it caches must be the one the user gave
as user data. Ignition's requests are checked as they arrived (docs/metadata.md#ignition).

A config over Nova's 64 KiB user data limit needs ``[api] max_user_data_bytes`` raised
(issue 34, part 3): until the option exists, that test checks only that such user data is
refused at the default limit; once it does, the same test boots it through an API node with
the option raised and fetches it from the service and the drive.

Needs root, Debian's ignition, util-linux and iproute2 (CI runs as root; tools/
debian-packages.sh installs ignition): skips with the reason otherwise, fails under
``CLOUDSEED_REQUIRE_DBS=1``. Runs once, on SQLite.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from cloudseed.compute import netns
from cloudseed.configdrive.service import drive_path, read_drive, write_drive
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support import databases, ignition
from tests.support.cloud import mv
from tests.support.cloudinit_run import guest_relay
from tests.support.guest_netns import namespace_prefix
from tests.support.guests import Guest, boot
from tests.support.metadata_relay import Relay
from tests.support.module_cloud import ModuleCloud, module_cloud
from tests.support.server import running_api, with_options

pytestmark = [
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

METADATA_ADDRESS = "169.254.169.254"
LARGE_OPTION = "max_user_data_bytes"


def ignition_config(files: int = 1, size: int = 16) -> dict[str, Any]:
    """An Ignition v3.3 config: a user with a key, a unit, and ``files`` files of ``size``
    bytes each (inline data URLs)."""
    return {
        "ignition": {"version": "3.3.0"},
        "passwd": {
            "users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3Nz core@test"]}]
        },
        "systemd": {"units": [{"name": "hello.service", "enabled": True, "contents": "[Unit]\n"}]},
        "storage": {
            "files": [
                {
                    "path": f"/etc/cloudseed/file-{i}",
                    "mode": 0o644,
                    "contents": {"source": "data:," + f"{i:04d}".ljust(size, "x")},
                }
                for i in range(files)
            ]
        },
    }


CONFIG = ignition_config()


def assert_cached_is(cached: dict[str, Any] | None, given: dict[str, Any]) -> None:
    """The cached config is Ignition's own rendering (translated to its latest spec, every
    optional member written out): it must hold what the user gave, member for member."""
    assert cached is not None, "Ignition wrote no config cache"
    assert cached["ignition"]["version"].startswith("3.")
    assert cached["passwd"]["users"] == [
        {"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3Nz core@test"]}
    ]
    assert [(u["name"], u["enabled"], u["contents"]) for u in cached["systemd"]["units"]] == [
        ("hello.service", True, "[Unit]\n")
    ]
    files = [(f["path"], f["mode"], f["contents"]["source"]) for f in cached["storage"]["files"]]
    assert files == [
        (f["path"], f["mode"], f["contents"]["source"]) for f in given["storage"]["files"]
    ]


@dataclass
class Coreos:
    world: ModuleCloud
    namespace: str
    settings: Settings
    api_db: Database
    tmp: Path
    guests: dict[str, Guest] = field(default_factory=dict)
    runs: int = 0

    def work(self) -> Path:
        self.runs += 1
        return self.tmp / f"run-{self.runs}"

    def fetch_from_service(self, guest: Guest) -> tuple[ignition.Fetch, Relay]:
        sock = netns.listening_socket(self.namespace, METADATA_ADDRESS, 80)
        with guest_relay(self.world.metadata_url, guest, sock=sock) as relay:
            run = ignition.fetch(self.work(), namespace=self.namespace)
        return run, relay

    def drive(self, guest: Guest, fmt: str) -> Path:
        iso = drive_path(self.settings, guest.id)
        if fmt == "iso9660":
            return iso
        _fmt, _label, tree = read_drive(iso)
        image = self.tmp / f"{guest.id}.{fmt}"
        write_drive(tree, image, fmt)
        return image


@pytest.fixture(scope="module")
def coreos(
    api_url: str,
    api_db: Database,
    cell_db: Database,
    migrated_settings: Settings,
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Coreos]:
    problem = ignition.problem()
    if problem is not None:
        if databases.required():
            pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {problem}")
        pytest.skip(problem)
    tmp = tmp_path_factory.mktemp("ignition")
    namespace = f"{namespace_prefix()}-ign"
    with module_cloud(
        api_url=api_url,
        api_db=api_db,
        cell_db=cell_db,
        settings=migrated_settings,
        database_url=database_url,
        tmp=tmp,
    ) as world:
        netns.create(namespace)
        try:
            netns.ip(namespace, "link", "set", "lo", "up")
            netns.ip(namespace, "address", "add", f"{METADATA_ADDRESS}/32", "dev", "lo")
            state = Coreos(world, namespace, migrated_settings, api_db, tmp)
            for name, user_data in (
                ("config", json.dumps(CONFIG).encode()),
                ("none", None),
                ("gzip", gzip.compress(json.dumps(CONFIG).encode(), mtime=0)),
            ):
                fields: dict[str, Any] = {"config_drive": True}
                if user_data is not None:
                    fields["user_data"] = base64.b64encode(user_data).decode()
                state.guests[name] = boot(world.api, world.cloud, **fields)
            yield state
        finally:
            netns.delete(namespace)


# -- the tests ------------------------------------------------------------------------------


def test_fetch_from_the_metadata_service(coreos: Coreos) -> None:
    run, relay = coreos.fetch_from_service(coreos.guests["config"])
    assert run.returncode == 0, run.log
    assert run.from_metadata_service, run.log
    assert_cached_is(run.config, CONFIG)
    # What Ignition asked, once: no retry was needed.
    (exchange,) = relay.exchanges
    assert (exchange.method, exchange.path, exchange.status) == (
        "GET",
        "/openstack/latest/user_data",
        200,
    )
    assert (
        exchange.headers["accept"]
        == "application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1"
    )
    assert exchange.headers["accept-encoding"] == "identity"
    # Ignition/<version>: Debian's says "Ignition/Debian 2.14.0+ds1-...".
    assert exchange.headers["user-agent"].startswith("Ignition/")
    assert "2.14" in exchange.headers["user-agent"]


@pytest.mark.parametrize("fmt", ["iso9660", "vfat"])
def test_fetch_from_the_config_drive_without_network(coreos: Coreos, fmt: str) -> None:
    image = coreos.drive(coreos.guests["config"], fmt)
    run = ignition.fetch(coreos.work(), namespace=None, drive=image)
    assert run.returncode == 0, run.log
    assert run.from_config_drive and not run.from_metadata_service, run.log
    assert_cached_is(run.config, CONFIG)


def test_no_user_data_is_an_empty_config_not_a_failure(coreos: Coreos) -> None:
    run, relay = coreos.fetch_from_service(coreos.guests["none"])
    assert run.returncode == 0, run.log
    assert [(e.path, e.status) for e in relay.exchanges] == [("/openstack/latest/user_data", 404)]
    assert run.config is not None
    assert run.config["storage"] == {} and run.config["passwd"] == {}


def test_gzip_user_data_is_served_as_given_and_openstack_ignition_refuses_it(
    coreos: Coreos,
) -> None:
    # Ignition decompresses user data on AWS (and, later, Akamai) only: on OpenStack a
    # gzipped config is not JSON to it, and the fetch stage fails.
    run, relay = coreos.fetch_from_service(coreos.guests["gzip"])
    assert [(e.path, e.status) for e in relay.exchanges] == [("/openstack/latest/user_data", 200)]
    assert run.returncode != 0
    assert run.config is None
    assert "failed to acquire config" in run.log


def test_a_config_over_64_kib_needs_the_limit_raised(coreos: Coreos) -> None:
    # About 77 KiB of JSON: over the user data limit, under the request body limit (112 KiB,
    # [oslo_middleware] max_request_body_size) once in base64.
    large = ignition_config(files=36, size=2048)
    raw = json.dumps(large).encode()
    assert len(raw) > 64 * 1024
    user_data = base64.b64encode(raw).decode()
    # At the default limit (Nova's 65,535 characters of base64) it is refused, as by Nova.
    r = coreos.world.api.post(
        "/v2.1/servers",
        json={
            "server": {
                "name": "big",
                "imageRef": coreos.world.cloud.image_id,
                "flavorRef": "1",
                "networks": [{"uuid": coreos.world.cloud.network_id}],
                "user_data": user_data,
            }
        },
        headers=mv("2.37"),
    )
    assert r.status_code == 400, r.text
    assert "user_data" in r.json()["badRequest"]["message"]
    # An API node with the option raised; the session's compute agent builds the drive.
    raised = with_options(coreos.settings, "api", **{LARGE_OPTION: 1 << 20})
    with (
        running_api(raised, api_db=coreos.api_db, compute=False, zone="nova") as url,
        httpx.Client(base_url=url, headers={"X-Auth-Token": "alice:proj"}, timeout=30) as api,
    ):
        guest = boot(api, coreos.world.cloud, config_drive=True, user_data=user_data)
    run, _relay = coreos.fetch_from_service(guest)
    assert run.returncode == 0, run.log
    assert_cached_is(run.config, large)
    run = ignition.fetch(coreos.work(), namespace=None, drive=coreos.drive(guest, "iso9660"))
    assert run.returncode == 0, run.log
    assert_cached_is(run.config, large)
