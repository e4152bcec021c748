"""The admin password and personality files reach the driver on create and rebuild (for
injection and config drives), and are never stored: later operations do not have them."""

from __future__ import annotations

import base64

import pytest

from cloudseed.compute.fake import FakeDriver
from tests.support.cloud import create_server, make_cloud, mv, wait_for

pytestmark = pytest.mark.databases


def test_create_and_rebuild_hand_the_password_and_files_to_the_driver(
    api, api_db, tmp_path, fake_driver: FakeDriver
) -> None:
    cloud = make_cloud(api, api_db, tmp_path)
    created = create_server(
        api,
        cloud,
        "2.56",
        adminPass="first pw",
        personality=[{"path": "/etc/motd", "contents": base64.b64encode(b"hi\n").decode()}],
    )
    assert created["adminPass"] == "first pw"
    wait_for(api, created["id"], "ACTIVE")
    spec = fake_driver.guests[created["id"]]
    assert (spec.admin_password, spec.files) == ("first pw", (("/etc/motd", b"hi\n"),))

    r = api.post(
        f"/v2.1/servers/{created['id']}/action",
        headers=mv("2.56"),
        json={"rebuild": {"imageRef": cloud.image_id, "adminPass": "second pw"}},
    )
    assert r.status_code == 202, r.text
    wait_for(api, created["id"], "ACTIVE")
    spec = fake_driver.guests[created["id"]]
    assert (spec.admin_password, spec.files) == ("second pw", ())

    # A start after a stop is not a build: nothing was kept to give the driver.
    assert (
        api.post(f"/v2.1/servers/{created['id']}/action", json={"os-stop": None}).status_code == 202
    )
    wait_for(api, created["id"], "SHUTOFF")
    assert (
        api.post(f"/v2.1/servers/{created['id']}/action", json={"os-start": None}).status_code
        == 202
    )
    wait_for(api, created["id"], "ACTIVE")
    spec = fake_driver.guests[created["id"]]
    assert (spec.admin_password, spec.files) == (None, ())
