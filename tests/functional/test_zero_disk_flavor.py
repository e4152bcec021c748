"""Zero-disk flavors (issue 30): a flavor with disk 0 sizes the root disk by the image, so a
sparse image claiming any virtual size could fill the host's disk. As Nova since Ussuri
(policy ``os_compute_api:servers:create:zero_disk_flavor``, OSSN-0083), only an administrator
may boot an image on one; cloudseed has no volumes, so every non-admin create on such a
flavor is refused with Nova's 403 and nothing is written."""

from __future__ import annotations

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from tests.support.cloud import Cloud, mv, wait_for
from tests.support.snapshot import changes, snapshot

ADMIN = {"X-Auth-Token": "admin:proj"}
ZERO_DISK = "z0"
FORBIDDEN = {
    "forbidden": {
        "code": 403,
        "message": "Only volume-backed servers are allowed for flavors with zero disk.",
    }
}


@pytest.fixture()
def zero_disk_flavor(cloud: Cloud, api_db: Database) -> str:
    api_db.run(
        lambda session: flavors.add_flavor(
            session, name="zero.disk", flavorid=ZERO_DISK, vcpus=1, ram=64, disk=0
        ),
        write=True,
    )
    return ZERO_DISK


def post_server(
    api: httpx.Client,
    cloud: Cloud,
    flavor: str,
    headers: dict[str, str] | None = None,
    **more: object,
) -> httpx.Response:
    body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": flavor, **more}
    return api.post(
        "/v2.1/servers", json={"server": body}, headers={**mv("2.1"), **(headers or {})}
    )


@pytest.mark.parametrize("count", [1, 3])
def test_a_non_admin_cannot_boot_an_image_on_a_zero_disk_flavor(
    api: httpx.Client,
    cloud: Cloud,
    zero_disk_flavor: str,
    api_db: Database,
    cell_db: Database,
    count: int,
) -> None:
    before = snapshot(api_db, cell_db)
    r = post_server(api, cloud, zero_disk_flavor, min_count=count, max_count=count)
    assert r.status_code == 403, r.text
    assert r.json() == FORBIDDEN
    # No instance (so no quota used), no mapping, no address, no action in either database.
    assert changes(before, snapshot(api_db, cell_db)) == []
    assert api.get("/v2.1/servers").json()["servers"] == []


def test_a_missing_image_is_answered_before_the_zero_disk_rule(
    api: httpx.Client, cloud: Cloud, zero_disk_flavor: str
) -> None:
    """Nova resolves the image before it weighs the flavor's disk: the image's error, not 403."""
    missing = "7d0a9b8e-0000-4000-8000-000000000000"
    on_disk = post_server(api, cloud, "1", imageRef=missing)
    on_zero_disk = post_server(api, cloud, zero_disk_flavor, imageRef=missing)
    assert on_disk.status_code in (400, 404), on_disk.text
    assert (on_zero_disk.status_code, on_zero_disk.json()) == (on_disk.status_code, on_disk.json())


def test_an_admin_may_boot_an_image_on_a_zero_disk_flavor(
    api: httpx.Client, cloud: Cloud, zero_disk_flavor: str
) -> None:
    r = post_server(api, cloud, zero_disk_flavor, headers=ADMIN)
    assert r.status_code == 202, r.text
    server_id = r.json()["server"]["id"]
    server = wait_for(api, server_id, "ACTIVE")
    assert server["flavor"]["id"] == ZERO_DISK


def test_a_non_admin_boots_on_a_flavor_with_a_disk(api: httpx.Client, cloud: Cloud) -> None:
    r = post_server(api, cloud, "1")
    assert r.status_code == 202, r.text
    wait_for(api, r.json()["server"]["id"], "ACTIVE")


def rebuild(api: httpx.Client, server_id: str, image_id: str, **headers: str) -> httpx.Response:
    return api.post(
        f"/v2.1/servers/{server_id}/action",
        json={"rebuild": {"imageRef": image_id}},
        headers={**mv("2.1"), **headers},
    )


def test_rebuild_on_a_zero_disk_flavor_is_for_admins_too(
    api: httpx.Client,
    cloud: Cloud,
    zero_disk_flavor: str,
    api_db: Database,
    cell_db: Database,
) -> None:
    """Nova checks the rule on rebuild as well (``_checks_for_create_and_rebuild``): the
    project's own server, made by an administrator, cannot be rebuilt by its non-admin user."""
    r = post_server(api, cloud, zero_disk_flavor, headers=ADMIN)
    assert r.status_code == 202, r.text
    server_id = r.json()["server"]["id"]
    wait_for(api, server_id, "ACTIVE")
    before = snapshot(api_db, cell_db)
    r = rebuild(api, server_id, cloud.image2_id)
    assert r.status_code == 403, r.text
    assert r.json() == FORBIDDEN
    assert changes(before, snapshot(api_db, cell_db)) == []
    assert wait_for(api, server_id, "ACTIVE")["image"]["id"] == cloud.image_id
    r = rebuild(api, server_id, cloud.image2_id, **ADMIN)
    assert r.status_code == 202, r.text
    assert wait_for(api, server_id, "ACTIVE")["image"]["id"] == cloud.image2_id
