"""Vendordata through the metadata service and the build: static file, dynamic targets (real
HTTP servers), their cache, and the fatal-failure mode that fails a build."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cloudseed.compute.fake import FakeDriver
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, create_server, wait_for
from tests.support.guests import boot
from tests.support.server import running_api, running_metadata, with_options
from tests.support.vendordata_targets import Targets

pytestmark = [
    pytest.mark.loopback_guests,
    pytest.mark.databases,
    pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True),
]


def vendordata_settings(
    settings: Settings, tmp_path: Path, targets: Targets, target_list: str, **api: object
) -> Settings:
    static = tmp_path / "vendor.json"
    static.write_text(json.dumps({"cloud-init": "#cloud-config\nruncmd: [[touch, /vd]]\n"}))
    return with_options(
        settings,
        "api",
        vendordata_providers="StaticJSON,DynamicJSON",
        vendordata_jsonfile_path=str(static),
        vendordata_dynamic_targets=target_list,
        **api,
    )


def test_static_and_dynamic_vendordata_reach_the_guest(
    api: httpx.Client,
    cloud: Cloud,
    migrated_settings: Settings,
    api_db: Database,
    tmp_path: Path,
    targets: Targets,
) -> None:
    targets.reset()
    settings = vendordata_settings(
        migrated_settings,
        tmp_path,
        targets,
        f"cloud-init@{targets.url('/record')},cached@{targets.url('/cached')},"
        f"broken@{targets.url('/error')}",
    )
    guest = boot(api, cloud, metadata={"role": "db"})
    with running_metadata(settings, api_db=api_db) as url, guest.client(url) as md:
        static = md.get("/openstack/latest/vendor_data.json").json()
        assert static == {"cloud-init": "#cloud-config\nruncmd: [[touch, /vd]]\n"}
        doc = md.get("/openstack/latest/vendor_data2.json").json()
        assert list(doc) == ["static", "cloud-init", "cached", "broken"]
        assert doc["static"] == static
        assert doc["cloud-init"]["instance"] == guest.id
        assert doc["broken"] == {}
        (call,) = targets.calls_to("/record", guest.id)
        sent = call.json
        assert sent["instance-id"] == guest.id and sent["project-id"] == "proj"
        assert sent["metadata"] == {"role": "db"} and sent["hostname"] == "vm"
        assert set(sent) == {
            "project-id",
            "instance-id",
            "image-id",
            "user-data",
            "hostname",
            "metadata",
            "boot-roles",
        }
        for _ in range(5):
            md.get("/openstack/latest/vendor_data2.json")
        # max-age: the cached target was called once for all six requests.
        assert len(targets.calls_to("/cached", guest.id)) == 1
        assert len(targets.calls_to("/record", guest.id)) == 6


def test_fatal_vendordata_failure_fails_the_build(
    migrated_settings: Settings,
    api_db: Database,
    clean_api_db: Database,
    clean_cell_db: Database,
    tmp_path: Path,
    targets: Targets,
) -> None:
    settings = vendordata_settings(
        migrated_settings,
        tmp_path,
        targets,
        f"needed@{targets.url('/error')}",
        vendordata_dynamic_failure_fatal=True,
    )
    with (
        running_api(settings, api_db=api_db, driver=FakeDriver(delay=0)) as url,
        httpx.Client(base_url=url, headers={"X-Auth-Token": "alice:proj"}, timeout=30) as client,
    ):
        from tests.support.cloud import make_cloud

        made = make_cloud(client, api_db, tmp_path)
        server = create_server(client, made)
        failed = wait_for(client, server["id"], "ERROR")
        assert "Vendordata target 'needed' failed" in failed["fault"]["message"]
