"""Large and compressed user data (``[api] max_user_data_bytes``), on every database backend:
at the raised limit, 1 MiB of gzip and the option's ceiling (16 MiB less 256 KiB of base64) of
binary are accepted and served byte for byte by the OpenStack tree, the EC2 tree and the config
drive; over the limit, invalid base64 and over-large bodies are Nova's 400 (or 413) with nothing
stored; at the default, Nova's limit holds. One API, one metadata service and two servers for
the whole module."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cloudseed.compute.fake import FakeDriver
from cloudseed.configdrive.service import drive_path
from cloudseed.db.engines import Database
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, create_server, make_cloud, mv, wait_for
from tests.support.guests import add_loop_network
from tests.support.server import own_host, running_api, running_metadata
from tests.support.snapshot import changes, snapshot

CEILING = 16 * 1024 * 1024 - 256 * 1024  # the option's maximum, in base64 characters
NOVA_LIMIT = 65535
ADMIN = {"X-Auth-Token": "admin:proj"}


@dataclass
class Large:
    settings: Settings
    api: httpx.Client
    nova: httpx.Client  # the same cloud at the option's default: Nova's limit
    metadata_url: str
    api_db: Database
    cell_db: Database
    cloud: Cloud
    servers: dict[str, tuple[str, str, bytes]]  # name -> (id, address, user data)


def raised(settings: Settings) -> Settings:
    api = dataclasses.replace(settings.api, max_user_data_bytes=CEILING)
    return dataclasses.replace(settings, api=api)


def at_the_ceiling() -> bytes:
    """Binary (not UTF-8) user data whose base64 text is exactly the ceiling."""
    return os.urandom(CEILING // 4 * 3)


def one_mib_of_gzip() -> bytes:
    packed = gzip.compress(os.urandom(1024 * 1024), mtime=0)
    assert packed[:2] == b"\x1f\x8b"
    return packed


@pytest.fixture(scope="module")
def large(
    migrated_settings: Settings,
    module_clean_dbs: tuple[Database, Database],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Large]:
    api_db, cell_db = module_clean_dbs
    # One compute host and zone for both APIs, so the default one's servers are scheduled too.
    settings = own_host(raised(migrated_settings))
    at_default = dataclasses.replace(settings, api=migrated_settings.api)
    token = {"X-Auth-Token": "alice:proj"}
    with (
        running_api(settings, api_db=api_db, driver=FakeDriver()) as api_url,
        running_api(at_default, api_db=api_db, compute=False) as nova_url,
        running_metadata(settings, api_db=api_db) as metadata_url,
        httpx.Client(base_url=api_url, headers=token, timeout=120) as api,
        httpx.Client(base_url=nova_url, headers=token, timeout=30) as nova,
    ):
        cloud = make_cloud(api, api_db, tmp_path_factory.mktemp("large"))
        add_loop_network(api_db, cloud)
        servers = {}
        for name, data in (("gzip", one_mib_of_gzip()), ("ceiling", at_the_ceiling())):
            created = create_server(
                api,
                cloud,
                "2.37",
                networks=[{"uuid": cloud.network_id}],
                config_drive=True,
                user_data=base64.b64encode(data).decode(),
            )
            server = wait_for(api, created["id"], "ACTIVE", version="2.37", timeout=120)
            address = server["addresses"]["loop"][0]["addr"]
            servers[name] = (created["id"], address, data)
        yield Large(settings, api, nova, metadata_url, api_db, cell_db, cloud, servers)


def drive_file(image: Path, name: str) -> bytes:
    """One file of an ISO drive, by its Rock Ridge path (the whole tree would hold a dozen
    copies of the user data)."""
    import pycdlib

    iso = pycdlib.PyCdlib()
    iso.open(str(image))
    try:
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, rr_path="/" + name)
        return out.getvalue()
    finally:
        iso.close()


@pytest.mark.parametrize("name", ["gzip", "ceiling"])
def test_served_byte_for_byte(large: Large, name: str) -> None:
    server_id, address, data = large.servers[name]
    r = large.api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv("2.3")})
    assert r.json()["server"]["OS-EXT-SRV-ATTR:user_data"] == base64.b64encode(data).decode()
    with httpx.Client(
        base_url=large.metadata_url,
        timeout=60,
        transport=httpx.HTTPTransport(local_address=address),
    ) as guest:
        for path in ("/openstack/latest/user_data", "/openstack/2012-08-10/user_data"):
            served = guest.get(path)
            assert served.status_code == 200
            assert served.headers["content-type"] == "application/octet-stream"
            assert served.content == data, path
        for path in ("/latest/user-data", "/2009-04-04/user-data"):
            assert guest.get(path).content == data, path
    image = drive_path(large.settings, server_id)
    for path in ("openstack/latest/user_data", "ec2/latest/user-data"):
        assert drive_file(image, path) == data, path


def refused(response: httpx.Response, status: int, fault: str, text: str) -> None:
    assert response.status_code == status, response.text[:300]
    assert list(response.json()) == [fault]
    assert text in response.json()[fault]["message"][-200:]


@pytest.fixture()
def nothing_stored(large: Large) -> Iterator[None]:
    """Every table of both databases the same after the test as before (one snapshot each
    way: the rows hold megabytes of user data)."""
    before = snapshot(large.api_db, large.cell_db)
    yield
    assert changes(before, snapshot(large.api_db, large.cell_db)) == []


@pytest.mark.usefixtures("nothing_stored")
def test_over_the_limit_invalid_base64_and_broken_gzip_are_refused(large: Large) -> None:
    server_id = large.servers["gzip"][0]
    create = {"name": "vm", "imageRef": large.cloud.image_id, "flavorRef": "1"}
    over = "A" * (CEILING + 4)
    sends = [
        lambda: large.api.post("/v2.1/servers", json={"server": {**create, "user_data": over}}),
        lambda: large.api.put(
            f"/v2.1/servers/{server_id}",
            headers=mv("2.105"),
            json={"server": {"user_data": over}},
        ),
        lambda: large.api.post(
            f"/v2.1/servers/{server_id}/action",
            headers=mv("2.57"),
            json={"rebuild": {"imageRef": large.cloud.image_id, "user_data": over}},
        ),
        lambda: large.api.post(
            f"/v2.1/servers/{server_id}/action",
            headers=mv("2.105"),
            json={"reboot": {"type": "HARD", "user_data": over}},
        ),
    ]
    for send in sends:
        refused(send(), 400, "badRequest", "is too long")
    for bad in ("abc", "é" * 8, "QQ" * 1001):
        r = large.api.post("/v2.1/servers", json={"server": {**create, "user_data": bad}})
        refused(r, 400, "badRequest", "is not a 'base64'")
    # Gzip that is not a gzip stream (cut short, corrupt, trailing bytes): the guest could
    # not read it, so it is refused on every route that takes user data.
    packed = gzip.compress(b"#cloud-config\n" * 100, mtime=0)
    corrupt = bytearray(packed)
    corrupt[len(packed) // 2] ^= 0xFF
    for broken in (packed[:-4], bytes(corrupt), packed + b"not gzip"):
        value = base64.b64encode(broken).decode()
        r = large.api.post("/v2.1/servers", json={"server": {**create, "user_data": value}})
        refused(r, 400, "badRequest", "starts like gzip but is not a gzip stream")
        r = large.api.put(
            f"/v2.1/servers/{server_id}", headers=mv("2.105"), json={"server": {"user_data": value}}
        )
        refused(r, 400, "badRequest", "is not a gzip stream")
    # A body larger than the limit lets through: 413, before it is read whole.
    huge = "A" * (CEILING + large.settings.oslo_middleware.max_request_body_size)
    r = large.api.post("/v2.1/servers", json={"server": {**create, "user_data": huge}})
    refused(r, 413, "overLimit", "")


def test_the_default_is_novas_limit(large: Large, nothing_stored: None) -> None:
    create = {"name": "vm", "imageRef": large.cloud.image_id, "flavorRef": "1"}
    over = "A" * (NOVA_LIMIT + 1)
    r = large.nova.post("/v2.1/servers", json={"server": {**create, "user_data": over}})
    refused(r, 400, "badRequest", "is too long")
    # A body the raised limit would take is over the default's body limit.
    one_mib = base64.b64encode(one_mib_of_gzip()).decode()
    r = large.nova.post("/v2.1/servers", json={"server": {**create, "user_data": one_mib}})
    refused(r, 413, "overLimit", "")


def test_the_default_takes_novas_largest(large: Large) -> None:
    create = {"name": "vm", "imageRef": large.cloud.image_id, "flavorRef": "1"}
    at_limit = base64.b64encode(b"x" * (NOVA_LIMIT // 4 * 3)).decode()
    r = large.nova.post("/v2.1/servers", json={"server": {**create, "user_data": at_limit}})
    assert r.status_code == 202, r.text
