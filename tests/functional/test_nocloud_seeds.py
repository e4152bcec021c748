"""NoCloud seeds (2.107) over real HTTP, on every database backend: the compute API's
``/servers/{id}/nocloud-seed`` (owner, administrator, another project, below 2.107, rotate,
revoke, expiry) and the seed URLs on a real metadata listener, requested from an address that
is no guest's and through no proxy: the token alone says which server. Every bad token or path
is the same 404, nothing is logged as an error, and no log line holds a token.

cloud-init's own NoCloud reader on a seed URL and on a CIDATA drive:
tests/compat/test_cloud_init_nocloud.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import json
import logging
import time
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from cloudseed.agent.seed_urls import RENEW_WITHIN, SeedUrls
from cloudseed.db.engines import Database
from cloudseed.nocloud import seeds
from cloudseed.servers import records
from cloudseed.servers.models import InstanceSystemMetadata
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, b64, mv
from tests.support.guests import boot
from tests.support.waiting import eventually, wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

SEEDS = mv("2.107")
ADMIN = {"X-Auth-Token": "admin:proj", **SEEDS}
MALLORY = {"X-Auth-Token": "mallory:other", **SEEDS}
USER_DATA = "#cloud-config\nruncmd: [echo 'seeded é']\n"
NOT_FOUND = "404 Not Found\n\nThe resource could not be found."
FILES = ("meta-data", "user-data", "vendor-data", "network-config")


def seed_of(api: httpx.Client, server_id: str, **headers: str) -> dict[str, str]:
    r = api.get(f"/v2.1/servers/{server_id}/nocloud-seed", headers=headers or SEEDS)
    assert r.status_code == 200, r.text
    body: dict[str, str] = r.json()["nocloud_seed"]
    return body


def token_of(seed: dict[str, str]) -> str:
    return seed["url"].rstrip("/").rsplit("/", 1)[1]


def fetch(metadata_url: str, path: str, method: str = "GET") -> tuple[int, bytes, str]:
    """One request with ``path`` sent exactly as written (http.client neither normalises
    dot segments nor decodes escapes): status, body, cache-control."""
    where = urlsplit(metadata_url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("cache-control") or ""
    finally:
        connection.close()


def files(metadata_url: str, token: str) -> dict[str, tuple[int, bytes]]:
    answers = {name: fetch(metadata_url, f"/nocloud/{token}/{name}") for name in FILES}
    return {name: (status, body) for name, (status, body, _) in answers.items()}


def refused(metadata_url: str, path: str) -> None:
    status, body, _ = fetch(metadata_url, path)
    assert (status, body.decode()) == (404, NOT_FOUND), path


def test_owner_gets_a_seed_url_that_serves_the_four_files(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64(USER_DATA), availability_zone="nova")
    seed = seed_of(api, guest.id)
    token = token_of(seed)
    assert len(token) == seeds.TOKEN_LENGTH
    assert seed["url"] == f"http://169.254.169.254/nocloud/{token}/"
    assert seed["kernel_cmdline"] == f"ds=nocloud;s={seed['url']}"
    expires = dt.datetime.strptime(seed["expires_at"], "%Y-%m-%dT%H:%M:%SZ")
    lifetime = expires.replace(tzinfo=dt.UTC) - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=7) - dt.timedelta(minutes=5) < lifetime <= dt.timedelta(days=7)
    # Shown again as it is: one seed until it is rotated, revoked or expires.
    assert seed_of(api, guest.id) == seed
    assert seed_of(api, guest.id, **ADMIN) == seed

    # From 127.0.0.1, no guest's address, with no proxy headers: the token is enough.
    got = files(metadata_url, token)
    assert {name: status for name, (status, _) in got.items()} == dict.fromkeys(FILES, 200)
    meta = json.loads(got["meta-data"][1])  # JSON, which YAML parsers read too
    assert meta == {
        "instance-id": guest.id,
        "local-hostname": "vm.novalocal",
        "public-keys": {"key1": cloud.key1},
        "availability-zone": "nova",
    }
    assert got["user-data"][1] == USER_DATA.encode()
    assert got["vendor-data"][1] == b""  # no vendordata provider here
    network = json.loads(got["network-config"][1])
    assert network == {
        "version": 2,
        "ethernets": {
            "eth0": {
                "match": {"macaddress": guest.mac},
                "mtu": 1500,
                "addresses": [f"{guest.address}/24"],
                "routes": [{"to": "0.0.0.0/0", "via": "127.0.0.1"}],
            }
        },
    }
    status, _, cache_control = fetch(metadata_url, f"/nocloud/{token}/meta-data")
    assert (status, cache_control) == (200, "no-store")
    assert fetch(metadata_url, f"/nocloud/{token}/meta-data", "HEAD")[:2] == (200, b"")
    assert fetch(metadata_url, f"/nocloud/{token}/meta-data", "POST")[0] == 405


def test_a_server_without_user_data_serves_empty_user_data(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud)
    got = files(metadata_url, token_of(seed_of(api, guest.id)))
    # cloud-init 22.4's NoCloudNet fails the whole seed on a user-data 404: empty, not absent.
    assert got["user-data"] == (200, b"")
    assert "public-keys" not in json.loads(got["meta-data"][1])


def test_other_projects_and_older_microversions_do_not_see_the_resource(
    api: httpx.Client, cloud: Cloud
) -> None:
    guest = boot(api, cloud)
    path = f"/v2.1/servers/{guest.id}/nocloud-seed"
    r = api.get(path, headers=MALLORY)
    assert r.status_code == 404
    assert r.json()["itemNotFound"]["message"] == f"Instance {guest.id} could not be found."
    r = api.post(f"{path}/action", json={"rotate": None}, headers=MALLORY)
    assert r.status_code == 404
    for version in ("2.1", "2.106"):
        r = api.get(path, headers=mv(version))
        assert r.status_code == 404, version
        assert r.json()["itemNotFound"]["message"] == "The resource could not be found."
        r = api.post(f"{path}/action", json={"rotate": None}, headers=mv(version))
        assert r.status_code == 404, version
    unknown = "00000000-0000-0000-0000-000000000000"
    assert api.get(f"/v2.1/servers/{unknown}/nocloud-seed", headers=SEEDS).status_code == 404


def test_rotate_and_revoke(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cell_db: Database
) -> None:
    guest = boot(api, cloud, key_name="key1")
    action = f"/v2.1/servers/{guest.id}/nocloud-seed/action"
    first = seed_of(api, guest.id)
    assert fetch(metadata_url, f"/nocloud/{token_of(first)}/meta-data")[0] == 200

    # Bad bodies are Nova's 400 and change nothing.
    bodies: list[object] = [
        {},
        {"rotate": None, "revoke": None},
        {"rotate": {}},
        {"renew": None},
        [],
    ]
    for body in bodies:
        r = api.post(action, json=body, headers=SEEDS)
        assert r.status_code == 400, body
        assert "badRequest" in r.json(), body
    assert seed_of(api, guest.id) == first

    r = api.post(action, json={"rotate": None}, headers=SEEDS)
    assert r.status_code == 200, r.text
    second = r.json()["nocloud_seed"]
    assert second["url"] != first["url"]
    assert seed_of(api, guest.id) == second
    refused(metadata_url, f"/nocloud/{token_of(first)}/meta-data")
    assert fetch(metadata_url, f"/nocloud/{token_of(second)}/meta-data")[0] == 200

    r = api.post(action, json={"revoke": None}, headers=SEEDS)
    assert (r.status_code, r.content) == (204, b"")
    refused(metadata_url, f"/nocloud/{token_of(second)}/meta-data")
    r = api.get(f"/v2.1/servers/{guest.id}/nocloud-seed", headers=SEEDS)
    assert r.status_code == 404
    assert "revoked" in r.json()["itemNotFound"]["message"]
    with cell_db.read() as session:
        stored = session.scalar(
            select(InstanceSystemMetadata.value).where(
                InstanceSystemMetadata.instance_uuid == guest.id,
                InstanceSystemMetadata.key == seeds.SYSTEM_METADATA_KEY,
            )
        )
    assert stored == seeds.REVOKED

    # An administrator rotates it back; the URL is new again.
    r = api.post(action, json={"rotate": None}, headers=ADMIN)
    assert r.status_code == 200, r.text
    third = r.json()["nocloud_seed"]
    assert third["url"] not in (first["url"], second["url"])
    assert fetch(metadata_url, f"/nocloud/{token_of(third)}/user-data")[0] == 200


def test_an_expired_seed_is_refused_and_a_get_makes_a_new_one(
    api: httpx.Client, cloud: Cloud, metadata_url: str, cell_db: Database
) -> None:
    guest = boot(api, cloud)
    first = seed_of(api, guest.id)
    with cell_db.read() as session:
        seed = seeds.parse_stored(records.load(session, guest.id).system_metadata["nocloud_seed"])
    assert seed is not None
    # The same nonce, its expiry moved into the past: the token made for it is refused.
    past = seeds.Seed(seed.nonce, int(time.time()) - 1)

    def expire(session: Session) -> None:
        row = session.scalars(
            select(InstanceSystemMetadata).where(
                InstanceSystemMetadata.instance_uuid == guest.id,
                InstanceSystemMetadata.key == seeds.SYSTEM_METADATA_KEY,
            )
        ).one()
        row.value = past.stored()
        records.guest_changed(session, guest.id)

    cell_db.run(expire, write=True)
    expired_token = seeds.token(b"", guest.id, past)
    eventually(lambda: fetch(metadata_url, f"/nocloud/{token_of(first)}/meta-data")[0] == 404)
    refused(metadata_url, f"/nocloud/{expired_token}/meta-data")
    fresh = seed_of(api, guest.id)
    assert fresh["url"] != first["url"]
    assert fetch(metadata_url, f"/nocloud/{token_of(fresh)}/meta-data")[0] == 200


def test_the_agent_boots_a_guest_with_its_seed_and_renews_it_before_it_ends(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
    migrated_settings: Settings,
) -> None:
    """What the compute agent gives a ``cloudseed_bootstrap=nocloud`` guest at each start
    (agent/seed_urls.py; the e2e guest boots from it: tests/e2e/test_nocloud.py)."""
    guest = boot(api, cloud)
    urls = SeedUrls.from_settings(migrated_settings)
    booted = urls.for_boot(cell_db, guest.id)
    # The seed the API shows (the first one is made by whichever asks first), working.
    assert booted == seed_of(api, guest.id)["url"]
    assert urls.for_boot(cell_db, guest.id) == booted
    token = booted.rstrip("/").rsplit("/", 1)[1]
    assert fetch(metadata_url, f"/nocloud/{token}/meta-data")[0] == 200

    # A seed that ends before the guest is done with it is replaced at the next start.
    with cell_db.read() as session:
        seed = seeds.parse_stored(records.load(session, guest.id).system_metadata["nocloud_seed"])
    assert seed is not None
    ending = seeds.Seed(seed.nonce, int(time.time()) + RENEW_WITHIN - 60)

    def shorten(session: Session) -> None:
        row = session.scalars(
            select(InstanceSystemMetadata).where(
                InstanceSystemMetadata.instance_uuid == guest.id,
                InstanceSystemMetadata.key == seeds.SYSTEM_METADATA_KEY,
            )
        ).one()
        row.value = ending.stored()
        records.guest_changed(session, guest.id)

    cell_db.run(shorten, write=True)
    renewed = urls.for_boot(cell_db, guest.id)
    assert renewed is not None and renewed != booted
    assert seed_of(api, guest.id)["url"] == renewed
    eventually(lambda: fetch(metadata_url, f"/nocloud/{token}/meta-data")[0] == 404)
    assert fetch(metadata_url, f"/nocloud/{token_of({'url': renewed})}/meta-data")[0] == 200

    # Revoked: the guest boots without a seed, and none is made for it.
    action = f"/v2.1/servers/{guest.id}/nocloud-seed/action"
    assert api.post(action, json={"revoke": None}, headers=SEEDS).status_code == 204
    assert urls.for_boot(cell_db, guest.id) is None
    assert api.get(f"/v2.1/servers/{guest.id}/nocloud-seed", headers=SEEDS).status_code == 404


def test_bad_tokens_and_paths_are_one_404_and_never_an_error(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    mine = boot(api, cloud, name="mine")
    theirs_client = httpx.Client(
        base_url=str(api.base_url), headers={"X-Auth-Token": "mallory:other"}, timeout=30
    )
    with theirs_client:
        theirs = boot(theirs_client, cloud, name="theirs")  # another project's server
        their_token = token_of(seed_of(theirs_client, theirs.id))
    gone = boot(api, cloud, name="gone")
    token = token_of(seed_of(api, mine.id))
    gone_token = token_of(seed_of(api, gone.id))
    assert fetch(metadata_url, f"/nocloud/{gone_token}/meta-data")[0] == 200
    assert api.delete(f"/v2.1/servers/{gone.id}").status_code == 204
    wait_until(
        lambda: api.get(f"/v2.1/servers/{gone.id}").status_code == 404,
        timeout=10,
        what="the deleted server gone",
    )

    raw = base64.urlsafe_b64decode(token + "==")
    their_raw = base64.urlsafe_b64decode(their_token + "==")

    def encode(value: bytes) -> str:
        return base64.urlsafe_b64encode(value).decode().rstrip("=")

    flipped = bytearray(raw)
    flipped[-1] ^= 1
    bad_tokens = {
        "wrong": encode(bytes(flipped)),
        "random": "A" * seeds.TOKEN_LENGTH,
        "deleted server": gone_token,
        # Another server's uuid with my MAC, and mine with theirs: a token is for one server.
        "their uuid, my mac": encode(their_raw[:16] + raw[16:]),
        "my uuid, their mac": encode(raw[:16] + their_raw[16:]),
        "short": token[:-1],
        "long": token + "A",
    }
    paths = [f"/nocloud/{bad}/meta-data" for bad in bad_tokens.values()]
    paths += [
        f"/nocloud/{token}/../{token}/meta-data",
        f"/nocloud/x/../{token}/meta-data",
        f"/nocloud/{token}/./meta-data",
        f"/nocloud//{token}/meta-data",
        f"/nocloud/{token}%2Fmeta-data",
        f"/nocloud/{token}/%6Deta-data",
        f"/nocloud/{token}/meta-data/",
        f"/nocloud/{token}/meta_data.json",
        f"/nocloud/{token}/",
        f"/nocloud/{token}",
        "/nocloud/",
        "/nocloud",
        f"/nocloud/{token}/meta-data%00",
        f"/nocloud/{token[:32]}%2F{token[32:]}/meta-data",
    ]
    for path in paths:
        refused(metadata_url, path)
    # The real ones still work, for both projects' servers.
    assert fetch(metadata_url, f"/nocloud/{token}/meta-data")[0] == 200
    assert fetch(metadata_url, f"/nocloud/{their_token}/meta-data")[0] == 200

    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # cloudseed's own lines (uvicorn's access log, which names every path, is off in
    # ``cloudseed serve``: serve.py).
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("cloudseed"))
    for secret in (token, their_token, gone_token):
        assert secret not in ours
    assert "/nocloud/<token>/meta-data" in ours  # refusals are logged, redacted
