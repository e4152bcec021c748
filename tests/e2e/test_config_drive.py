"""Scenario 2 (boot from a config drive, ISO 9660 and VFAT) and the config drive half of
scenario 4 (a HARD reboot carrying new user data rebuilds the drive). The ISO 9660 boot of
scenario 2 is scenario 4's first boot: one guest, the same markers checked (``report_lines``).

For these the service runs with its metadata proxies pointed at a port where nothing listens
(``[qemu] metadata_url``): a guest that fell back to the HTTP datasource would get only 502s,
find no datasource and never run its user data, so every marker seen here came off the drive.
The service is restarted for this (settings are read at start) and restarted as before after
each scenario."""

from __future__ import annotations

import pytest

from tests.e2e.guest_scripts import b64, drive_per_boot_user_data, key_hash, user_data
from tests.e2e.harness import Boot, E2ECloud, deleted_afterwards
from tests.support.ports import free_port

ROOT_KEYS = "file=/root/.ssh/authorized_keys"
USER_KEYS = "file=/home/debian/.ssh/authorized_keys"
VENDOR_MARKER = "E2E VENDOR run=vendor from-dynamic-target"
# Where the guest's kernel finds the drive: QEMU's ide-cd (what Nova attaches for ISO 9660)
# is the first CD-ROM; a VFAT drive is the second virtio disk, after the root disk.
DEVICE = {"iso9660": "/dev/sr0", "vfat": "/dev/vdb"}


@pytest.fixture(scope="module")
def unreachable_metadata() -> str:
    return f"http://127.0.0.1:{free_port()}"


def drive_only(fmt: str, metadata_url: str) -> dict[str, str]:
    return {"CLOUDSEED_CONFIG_DRIVE_FORMAT": fmt, "CLOUDSEED_QEMU__METADATA_URL": metadata_url}


def test_2_boot_from_a_vfat_config_drive(e2e_cloud, keypairs, timings, unreachable_metadata):
    cloud, ids = e2e_cloud
    with (
        cloud.reconfigured(drive_only("vfat", unreachable_metadata)),
        deleted_afterwards(cloud) as servers,
    ):
        boot = cloud.boot(
            ids,
            run="drive-vfat",
            key_name="key1",
            script=user_data("drive-vfat"),
            config_drive=True,
            servers=servers,
        )
        timings["2 config drive boot (vfat)"] = {
            "request_to_user_data_done_s": round(boot.seconds, 1),
            "guest_uptime_s": boot.guest_uptime,
        }
        assert_read_from_the_drive(cloud, boot, keypairs, "vfat")


def assert_read_from_the_drive(cloud: E2ECloud, boot: Boot, keypairs, fmt: str) -> None:
    """Scenario 2: the guest found its instance id, its keys and vendor data on the drive."""
    found = boot.markers
    assert found.of("BEGIN") == [f"iid={boot.server_id}"]
    assert found.of("DATASOURCE") == ["DataSourceConfigDrive"]
    assert found.of("SOURCE") == [DEVICE[fmt]]
    wanted = key_hash(keypairs["key1"])
    assert sorted(found.of("KEY")) == sorted(
        [f"{ROOT_KEYS} hash={wanted}", f"{USER_KEYS} hash={wanted}"]
    )
    # vendor_data2.json on the drive: the builder called the dynamic target.
    assert VENDOR_MARKER in cloud.console(boot.server_id)


def test_4_hard_reboot_with_user_data_rebuilds_the_drive(
    e2e_cloud, keypairs, timings, unreachable_metadata
):
    cloud, ids = e2e_cloud
    with (
        cloud.reconfigured(drive_only("iso9660", unreachable_metadata)),
        deleted_afterwards(cloud) as servers,
    ):
        boot = cloud.boot(
            ids,
            run="cd-v1",
            key_name="key1",
            script=drive_per_boot_user_data("cd-v1"),
            config_drive=True,
            servers=servers,
        )
        timings["2 and 4 config drive boot (iso9660) with per-boot user data"] = {
            "request_to_final_s": round(boot.seconds, 1),
            "guest_uptime_s": boot.guest_uptime,
        }
        assert_read_from_the_drive(cloud, boot, keypairs, "iso9660")
        new = drive_per_boot_user_data("cd-v2")
        rebooted = cloud.reboot_with_user_data(boot, run="cd-v2", script=new)
        timings["4 hard reboot with user_data (config drive)"] = {
            "request_to_final_s": round(rebooted.seconds, 1),
            "guest_uptime_s": rebooted.guest_uptime,
        }
        # The guest read the rebuilt drive at boot and ran the new bootcmd, not the old.
        console = cloud.console(boot.server_id)
        assert console.count("E2E BOOTCMD run=cd-v2") == 1
        assert console.count("E2E BOOTCMD run=cd-v1") == 1
        assert rebooted.markers.of("BOOTCMD") == [""]
        assert rebooted.markers.of("SOURCE") == [DEVICE["iso9660"]]
        assert_user_data(cloud, boot.server_id, new)


def assert_user_data(cloud: E2ECloud, server_id: str, expected: str) -> None:
    """The API, too, has the user data the reboot carried (2.3's extended attribute)."""
    r = cloud.client.get(
        f"/v2.1/servers/{server_id}",
        headers={"OpenStack-API-Version": "compute 2.105", "X-Auth-Token": "admin:e2e-project"},
    )
    assert r.status_code == 200, r.text
    stored = r.json()["server"]["OS-EXT-SRV-ATTR:user_data"]
    assert stored == b64(expected)
