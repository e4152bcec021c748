"""Config drives end to end, on every database backend: servers created, rebuilt and
rebooted through the real API, every image read back with independent tools (xorriso,
isoinfo, mtools, fsck.vfat) and with cloud-init's own ConfigDriveReader, and compared with
what the metadata service serves for the same instance."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from cloudseed.cells.service import CellDatabases
from cloudseed.cli import cli
from cloudseed.compute.fake import FakeDriver
from cloudseed.configdrive.service import DriveBuilder, drive_path
from cloudseed.db.engines import Database
from cloudseed.networks import service as networks
from cloudseed.settings import Settings
from tests.support import drive_tools
from tests.support.cloud import Cloud, b64, create_server, make_cloud, mv, wait_for
from tests.support.server import running_api, running_metadata
from tests.support.vendordata_targets import Targets
from tests.support.waiting import wait_until

pytestmark = pytest.mark.databases

VERSIONS = [
    "2012-08-10",
    "2013-04-04",
    "2013-10-17",
    "2015-10-15",
    "2016-06-30",
    "2016-10-06",
    "2017-02-22",
    "2018-08-27",
    "2020-10-14",
    "2025-04-04",
    "latest",
]
ADMIN = {"X-Auth-Token": "admin:proj"}


def with_options(settings: Settings, section: str, **values: Any) -> Settings:
    return dataclasses.replace(
        settings, **{section: dataclasses.replace(getattr(settings, section), **values)}
    )


@pytest.fixture(params=["iso9660", "vfat"])
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture()
def settings(migrated_settings: Settings, fmt: str) -> Settings:
    return with_options(migrated_settings, "default", config_drive_format=fmt)


@contextmanager
def compute_api(settings: Settings, api_db: Database) -> Iterator[httpx.Client]:
    with (
        running_api(settings, api_db=api_db, driver=FakeDriver()) as url,
        httpx.Client(base_url=url, headers={"X-Auth-Token": "alice:proj"}, timeout=30) as client,
    ):
        yield client


@pytest.fixture()
def client(
    settings: Settings, clean_api_db: Database, clean_cell_db: Database
) -> Iterator[httpx.Client]:
    with compute_api(settings, clean_api_db) as running:
        yield running


@pytest.fixture()
def cloud(client: httpx.Client, api_db: Database, tmp_path: Path) -> Cloud:
    made = make_cloud(client, api_db, tmp_path)

    def work(session: Session) -> None:
        made.network_id = networks.add_network(
            session, name="loop", cidr="127.0.0.0/24", gateway="127.0.0.1"
        ).uuid

    api_db.run(work, write=True)
    return made


def boot(
    client: httpx.Client, cloud: Cloud, version: str = "2.37", **fields: Any
) -> dict[str, Any]:
    fields.setdefault("networks", [{"uuid": cloud.network_id}])
    fields.setdefault("config_drive", True)
    created = create_server(client, cloud, version, **fields)
    server = wait_for(client, created["id"], "ACTIVE", version="2.37")
    server["adminPass"] = created["adminPass"]
    return server


def address_of(server: dict[str, Any]) -> str:
    return str(server["addresses"]["loop"][0]["addr"])


def read_back(image: Path, fmt: str, dest: Path) -> dict[str, bytes]:
    assert drive_tools.label(image, fmt) == "config-2"
    return drive_tools.extract(image, fmt, dest)


def without(doc: bytes, *keys: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(doc)
    for key in keys:
        value.pop(key, None)
    return value


def action_events(client: httpx.Client, server_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/v2.1/servers/{server_id}/os-instance-actions", headers=mv("2.21"))
    assert r.status_code == 200, r.text
    return list(r.json()["instanceActions"])


# -- create ---------------------------------------------------------------------------------


def test_drive_is_what_the_metadata_service_serves_and_cloud_init_reads_it(
    client: httpx.Client,
    cloud: Cloud,
    settings: Settings,
    api_db: Database,
    fmt: str,
    tmp_path: Path,
) -> None:
    user_data = b"#cloud-config\nruncmd: [[touch, /ok]]\n"
    server = boot(
        client,
        cloud,
        key_name="key1",
        user_data=base64.b64encode(user_data).decode(),
        metadata={"role": "db"},
        personality=[{"path": "/etc/injected.conf", "contents": b64("injected\n")}],
    )
    image = drive_path(settings, server["id"])
    tree = read_back(image, fmt, tmp_path / "tree")
    assert sorted({p.split("/")[1] for p in tree if p.startswith("openstack/")}) == sorted(
        [*VERSIONS, "content"]
    )
    assert sorted(p for p in tree if p.startswith("ec2/")) == [
        "ec2/2009-04-04/meta-data.json",
        "ec2/2009-04-04/user-data",
        "ec2/latest/meta-data.json",
        "ec2/latest/user-data",
    ]
    meta = json.loads(tree["openstack/latest/meta_data.json"])
    assert meta["admin_pass"] == server["adminPass"]
    assert meta["files"] == [{"path": "/etc/injected.conf", "content_path": "/content/0000"}]
    assert tree["openstack/content/0000"] == b"injected\n"

    with (
        running_metadata(settings, api_db=api_db) as url,
        httpx.Client(
            base_url=url,
            timeout=10,
            transport=httpx.HTTPTransport(local_address=address_of(server)),
        ) as md,
    ):
        for version in VERSIONS:
            base = f"openstack/{version}/"
            for name in ("user_data", "vendor_data.json", "network_data.json", "vendor_data2.json"):
                served = md.get("/" + base + name)
                if served.status_code == 404:
                    assert base + name not in tree
                else:
                    assert tree[base + name] == served.content, base + name
            served_meta = md.get(f"/{base}meta_data.json").content
            # Byte for byte once the drive-only fields and the seed are out.
            assert without(
                tree[base + "meta_data.json"], "admin_pass", "files", "random_seed"
            ) == without(served_meta, "random_seed")
        ec2 = json.loads(tree["ec2/latest/meta-data.json"])
        for leaf in ("instance-id", "hostname", "local-ipv4", "ami-id", "reservation-id"):
            assert str(ec2[leaf]).encode() == md.get(f"/latest/meta-data/{leaf}").content
        assert tree["ec2/latest/user-data"] == md.get("/latest/user-data").content == user_data
    if fmt == "iso9660":  # the Joliet names carry the same files
        assert (
            drive_tools.isoinfo_file(image, "openstack/latest/meta_data.json", names="-J")
            == tree["openstack/latest/meta_data.json"]
        )

    seen = drive_tools.cloud_init_reads(tmp_path / "tree")
    read = seen["read_v2"]
    assert read["metadata"]["uuid"] == server["id"]
    assert read["metadata"]["admin_pass"] == server["adminPass"]
    assert read["userdata"] == {"base64": base64.b64encode(user_data).decode()}
    assert read["files"] == {"/etc/injected.conf": {"base64": b64("injected\n")}}
    assert (
        read["networkdata"]["links"][0]["ethernet_mac_address"]
        == (server["addresses"]["loop"][0]["OS-EXT-IPS-MAC:mac_addr"])
    )
    assert read["vendordata"] == {}
    assert read["ec2-metadata"]["instance-id"] == ec2["instance-id"]
    assert seen["datasource"]["metadata"]["uuid"] == server["id"]


def test_no_drive_without_config_drive_and_none_left_after_delete(
    client: httpx.Client, cloud: Cloud, settings: Settings
) -> None:
    plain = boot(client, cloud, config_drive=False)
    assert not drive_path(settings, plain["id"]).exists()
    server = boot(client, cloud)
    image = drive_path(settings, server["id"])
    assert image.exists()
    assert client.delete(f"/v2.1/servers/{server['id']}").status_code == 204
    wait_until(
        lambda: not image.parent.exists(),
        timeout=10,
        interval=0.02,
        max_interval=0.02,
        what="the drive removed",
    )


# -- rebuild and HARD reboot ----------------------------------------------------------------


def test_rebuild_replaces_the_drive_atomically(
    client: httpx.Client, cloud: Cloud, settings: Settings, fmt: str, tmp_path: Path
) -> None:
    server = boot(client, cloud, personality=[{"path": "/old", "contents": b64("old")}])
    image = drive_path(settings, server["id"])
    before = image.stat().st_ino
    r = client.post(
        f"/v2.1/servers/{server['id']}/action",
        headers=mv("2.37"),
        json={
            "rebuild": {
                "imageRef": cloud.image2_id,
                "adminPass": "NewPass123",
                "personality": [{"path": "/new", "contents": b64("new")}],
            }
        },
    )
    assert r.status_code == 202, r.text
    wait_for(client, server["id"], "ACTIVE")
    assert image.stat().st_ino != before  # a new file renamed into place
    assert [p.name for p in image.parent.iterdir()] == ["disk.config"]
    tree = read_back(image, fmt, tmp_path / "tree")
    meta = json.loads(tree["openstack/latest/meta_data.json"])
    assert meta["admin_pass"] == "NewPass123"
    assert meta["files"] == [{"path": "/new", "content_path": "/content/0000"}]
    assert tree["openstack/content/0000"] == b"new"


def test_hard_reboot_with_user_data_rebuilds_the_drive_keeping_password_and_files(
    client: httpx.Client, cloud: Cloud, settings: Settings, fmt: str, tmp_path: Path
) -> None:
    server = boot(
        client,
        cloud,
        user_data=b64("old"),
        personality=[{"path": "/etc/x", "contents": b64("kept")}],
    )
    sid = server["id"]
    r = client.put(
        f"/v2.1/servers/{sid}", headers=mv("2.105"), json={"server": {"user_data": b64("new")}}
    )
    assert r.status_code == 409  # the drive holds user data: a HARD reboot changes it
    image = drive_path(settings, sid)
    before = image.stat().st_ino
    r = client.post(
        f"/v2.1/servers/{sid}/action",
        headers=mv("2.105"),
        json={"reboot": {"type": "HARD", "user_data": b64("new")}},
    )
    assert r.status_code == 202, r.text
    wait_for(client, sid, "ACTIVE")
    assert image.stat().st_ino != before
    tree = read_back(image, fmt, tmp_path / "tree")
    assert tree["openstack/latest/user_data"] == b"new"
    meta = json.loads(tree["openstack/latest/meta_data.json"])
    assert meta["admin_pass"] == server["adminPass"]
    assert tree["openstack/content/0000"] == b"kept"


def test_failed_drive_build_on_reboot_keeps_old_drive_and_user_data(
    client: httpx.Client, cloud: Cloud, settings: Settings, api_db: Database, targets: Targets
) -> None:
    # Operations run with the settings of the instance's host's agent: the server boots on a
    # host whose agent is then replaced by one with fatal vendordata, the same host name.
    host = with_options(
        settings,
        "default",
        host="cd-host",
        default_availability_zone="cd-host",
        default_schedule_zone="cd-host",
    )
    with compute_api(host, api_db) as booting:
        server = boot(booting, cloud, user_data=b64("old"))
    sid = server["id"]
    image = drive_path(settings, sid)
    old = image.read_bytes()
    fatal = with_options(
        host,
        "api",
        vendordata_providers="StaticJSON,DynamicJSON",
        vendordata_dynamic_targets=f"needed@{targets.url('/error')}",
        vendordata_dynamic_failure_fatal=True,
    )
    with compute_api(fatal, api_db) as failing:
        r = failing.post(
            f"/v2.1/servers/{sid}/action",
            headers=mv("2.105"),
            json={"reboot": {"type": "HARD", "user_data": b64("new")}},
        )
        assert r.status_code == 202, r.text
        wait_for(failing, sid, "ACTIVE")  # the guest was never touched
        reboot = next(a for a in action_events(failing, sid) if a["action"] == "reboot")
        r = failing.get(
            f"/v2.1/servers/{sid}/os-instance-actions/{reboot['request_id']}",
            headers={**ADMIN, **mv("2.84")},
        )
        (event,) = r.json()["instanceAction"]["events"]
        assert event["result"] == "Error"
        # A create with a drive fails outright.
        created = create_server(
            failing, cloud, "2.37", config_drive=True, networks=[{"uuid": cloud.network_id}]
        )
        errored = wait_for(failing, created["id"], "ERROR")
        assert "Vendordata target 'needed' failed" in errored["fault"]["message"]
    assert image.read_bytes() == old
    r = client.get(f"/v2.1/servers/{sid}", headers={**ADMIN, **mv("2.3")})
    assert r.json()["server"]["OS-EXT-SRV-ATTR:user_data"] == b64("old")


# -- vendordata -----------------------------------------------------------------------------


def test_dynamic_json_alone_is_fetched_once_per_build(
    settings: Settings,
    api_db: Database,
    clean_api_db: Database,
    clean_cell_db: Database,
    targets: Targets,
    fmt: str,
    tmp_path: Path,
) -> None:
    dynamic = with_options(
        settings,
        "api",
        vendordata_providers="DynamicJSON",
        vendordata_dynamic_targets=f"cloud@{targets.url('/record')}",
    )
    with compute_api(dynamic, api_db) as client:
        cloud_ = make_cloud(client, api_db, tmp_path)

        def work2(session: Session) -> None:
            cloud_.network_id = networks.add_network(
                session, name="loop", cidr="127.0.0.0/24", gateway="127.0.0.1"
            ).uuid

        api_db.run(work2, write=True)
        server = boot(client, cloud_)
        assert len(targets.calls_to("/record", server["id"])) == 1
        tree = read_back(drive_path(settings, server["id"]), fmt, tmp_path / "tree")
    assert not any(p.endswith("vendor_data.json") for p in tree)  # Nova fails here
    docs = {tree[f"openstack/{v}/vendor_data2.json"] for v in VERSIONS if v >= "2016-10-06"}
    assert len(docs) == 1
    assert json.loads(docs.pop())["cloud"]["instance"] == server["id"]
    read = drive_tools.cloud_init_reads(tmp_path / "tree")["read_v2"]
    assert read["vendordata2"]["cloud"]["instance"] == server["id"]


# -- big drives, through the builder --------------------------------------------------------


def test_a_thousand_files_and_64_kib_of_user_data(
    client: httpx.Client,
    cloud: Cloud,
    settings: Settings,
    api_db: Database,
    fmt: str,
    tmp_path: Path,
) -> None:
    server = boot(client, cloud, config_drive=False)
    files = tuple((f"/srv/file-{i}", f"content {i}\n".encode()) for i in range(1000))
    user_data = bytes(range(256)) * 256  # 64 KiB, not text
    cells = CellDatabases(api_db)
    builder = DriveBuilder(settings, cells)
    try:
        built = builder.build(
            server["id"],
            admin_pass="pw",
            files=files,
            user_data=base64.b64encode(user_data).decode(),
            output=tmp_path / "big.img",
        )
    finally:
        builder.close()
        cells.dispose()
    tree = read_back(Path(built.path), fmt, tmp_path / "tree")
    assert len([p for p in tree if p.startswith("openstack/content/")]) == 1000
    assert tree["openstack/content/0999"] == b"content 999\n"
    assert tree["openstack/latest/user_data"] == user_data
    read = drive_tools.cloud_init_reads(tmp_path / "tree")["read_v2"]
    assert len(read["files"]) == 1000
    assert read["files"]["/srv/file-999"] == {"base64": b64("content 999\n")}
    assert read["userdata"] == {"base64": base64.b64encode(user_data).decode()}


# -- personality limits ---------------------------------------------------------------------


def test_personality_limits_and_microversion(client: httpx.Client, cloud: Cloud) -> None:
    def create(version: str, files: list[dict[str, str]]) -> httpx.Response:
        return client.post(
            "/v2.1/servers",
            headers=mv(version),
            json={
                "server": {
                    "name": "vm",
                    "imageRef": cloud.image_id,
                    "flavorRef": "1",
                    "networks": "none",
                    "personality": files,
                }
            },
        )

    def one(path: str = "/a", text: str = "x") -> dict[str, str]:
        return {"path": path, "contents": base64.b64encode(text.encode()).decode()}

    r = create("2.37", [one()] * 6)
    assert (r.status_code, r.json()["forbidden"]["message"]) == (
        403,
        "Personality file limit exceeded",
    )
    r = create("2.37", [one(path="/" + "p" * 255)])
    assert r.json()["forbidden"]["message"] == "Personality file path exceeds maximum 255"
    r = create("2.37", [one(text="x" * 7681)])  # 10,244 base64 characters
    assert r.json()["forbidden"]["message"] == ("Personality file content exceeds maximum 10240")
    assert create("2.57", [one()]).status_code == 400
    assert create("2.37", [{"path": "/a", "contents": "not base64!"}]).status_code == 400
    assert client.get("/v2.1/servers").json()["servers"] == []
    server = boot(client, cloud)
    r = client.post(
        f"/v2.1/servers/{server['id']}/action",
        headers=mv("2.37"),
        json={"rebuild": {"imageRef": cloud.image_id, "personality": [one()] * 6}},
    )
    assert r.status_code == 403


# -- the CLI --------------------------------------------------------------------------------


def test_cli_build_and_show(
    client: httpx.Client, cloud: Cloud, settings: Settings, fmt: str, tmp_path: Path
) -> None:
    server = boot(client, cloud, personality=[{"path": "/p", "contents": b64("carried")}])
    env = {
        "CLOUDSEED_API_DATABASE__CONNECTION": settings.api_database_url,
        "CLOUDSEED_DATABASE__CONNECTION": settings.cell_database_url,
        "CLOUDSEED_STATE_PATH": str(settings.state_dir),
        "CLOUDSEED_CONFIG_DRIVE_FORMAT": fmt,
    }
    out = tmp_path / "drive.img"
    result = CliRunner().invoke(
        cli,
        ["configdrive", "build", server["id"], "--output", str(out)],
        env=env,
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert f"wrote {out} ({fmt})" in result.output
    tree = read_back(out, fmt, tmp_path / "tree")
    assert tree["openstack/content/0000"] == b"carried"  # from the instance's drive

    result = CliRunner().invoke(cli, ["configdrive", "show", str(out)], env=env)
    assert result.exit_code == 0, result.output
    assert f"{fmt}, label 'config-2', {len(tree)} files" in result.output
    assert "openstack/latest/meta_data.json" in result.output
    result = CliRunner().invoke(
        cli, ["configdrive", "show", str(out), "openstack/latest/meta_data.json"], env=env
    )
    assert result.exit_code == 0
    assert result.stdout_bytes == tree["openstack/latest/meta_data.json"]
    result = CliRunner().invoke(cli, ["configdrive", "show", str(out), "nope"], env=env)
    assert result.exit_code == 1 and "no such file" in result.output
    (tmp_path / "junk").write_bytes(b"junk" * 20000)
    result = CliRunner().invoke(cli, ["configdrive", "show", str(tmp_path / "junk")], env=env)
    assert result.exit_code == 1 and "neither an ISO 9660 nor a FAT image" in result.output
