"""Host keys over real HTTP, on every database backend: cloud-init's phone_home POST to a real
metadata service on a loopback port, and the compute API's ``host-keys`` resource (the console
fallback and ``cloudseed known-hosts``: tests/functional/test_host_keys_console.py).

Guests are the test helpers' loopback guests (tests/support/guests.py): a
client bound to an instance's 127.0.0.x address is that instance, and proxy mode runs a service
of its own with signed headers. The body is exactly what cloud-init 22.4's phone_home module
posts (tests/compat/test_cloud_init_phone_home.py runs the module itself).
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.hostkeys import service
from cloudseed.hostkeys.key_lines import parse_host_key
from cloudseed.hostkeys.models import HostKeyReport
from cloudseed.hostkeys.service import MAX_REPEATS
from cloudseed.servers.models import Instance
from cloudseed.signing import sign
from tests.support import keys
from tests.support.cloud import Cloud, mv, wait_for
from tests.support.guests import SECRET, Guest, MetadataServer, boot
from tests.support.host_keys import (
    FORM,
    PHONE_HOME,
    canonical,
    cloud_init_form,
    host_key_set,
    post,
    rows,
    shown,
)
from tests.support.identity import Identity, identity_token, verify

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

ADMIN = {"X-Auth-Token": "admin:proj"}
MALLORY = {"X-Auth-Token": "mallory:other"}
NEUTRON = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})


# -- phone_home ------------------------------------------------------------------------------


def test_phone_home_is_accepted_and_shown(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
) -> None:
    guest = boot(api, cloud)
    assert shown(api, guest.id) == []
    found = host_key_set()
    with guest.client(metadata_url) as md:
        r = post(md, cloud_init_form(guest.id, found))
        assert (r.status_code, r.text) == (200, "accepted\n")
    entries = shown(api, guest.id)
    assert [e["key"] for e in entries] == canonical(found)
    assert [e["type"] for e in entries] == ["ssh-rsa", "ecdsa-sha2-nistp256", "ssh-ed25519"]
    assert {e["source"] for e in entries} == {"phone_home"}
    for entry in entries:
        assert entry["fingerprint_sha256"] == parse_host_key(entry["key"]).fingerprint_sha256
        recorded = dt.datetime.strptime(entry["recorded_at"], "%Y-%m-%dT%H:%M:%SZ")
        assert abs(recorded - dt.datetime.now(dt.UTC).replace(tzinfo=None)) < dt.timedelta(
            minutes=5
        )
    with cell_db.read() as session:
        assert service.fingerprints(session, guest.id) == [e["fingerprint_sha256"] for e in entries]
        row = session.scalars(select(HostKeyReport)).one()
        assert (row.hostname, row.fqdn, row.role) == ("vm", "vm.novalocal", "accepted")


def test_a_replay_in_the_same_boot_is_recorded_but_never_replaces(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
) -> None:
    guest = boot(api, cloud)
    first, other = host_key_set(), host_key_set()
    with guest.client(metadata_url) as md:
        assert post(md, cloud_init_form(guest.id, first)).text == "accepted\n"
        assert post(md, cloud_init_form(guest.id, other)).text == "repeat\n"
        assert post(md, cloud_init_form(guest.id, first)).text == "repeat\n"
        # A reboot keeps the disk and its keys: the same generation.
        r = api.post(f"/v2.1/servers/{guest.id}/action", json={"reboot": {"type": "HARD"}})
        assert r.status_code == 202
        wait_for(api, guest.id, "ACTIVE")
        assert post(md, cloud_init_form(guest.id, other)).text == "repeat\n"
        for _ in range(MAX_REPEATS - 3):
            assert post(md, cloud_init_form(guest.id, other)).status_code == 200
        r = post(md, cloud_init_form(guest.id, other))
        assert r.status_code == 409 and "further reports are not kept" in r.text
    assert [e["key"] for e in shown(api, guest.id)] == canonical(first)
    assert (
        rows(cell_db, guest.id)
        == [("phone_home", "accepted")] + [("phone_home", None)] * MAX_REPEATS
    )


def test_a_rebuild_begins_a_new_boot_generation(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
) -> None:
    guest = boot(api, cloud)
    old, new = host_key_set(), host_key_set()
    with guest.client(metadata_url) as md:
        assert post(md, cloud_init_form(guest.id, old)).text == "accepted\n"
        cell_db.run(  # as while the agent runs the rebuild
            lambda session: session.execute(
                update(Instance).where(Instance.uuid == guest.id).values(task_state="rebuilding")
            ),
            write=True,
        )
        r = post(md, cloud_init_form(guest.id, new))
        assert r.status_code == 409 and "is being rebuilt" in r.text

        def work(session: Session) -> None:
            session.execute(
                update(Instance).where(Instance.uuid == guest.id).values(task_state=None)
            )

        cell_db.run(work, write=True)
        r = api.post(
            f"/v2.1/servers/{guest.id}/action",
            json={"rebuild": {"imageRef": cloud.image2_id}},
            headers=mv("2.37"),
        )
        assert r.status_code == 202, r.text
        wait_for(api, guest.id, "ACTIVE", version="2.37")
        assert shown(api, guest.id) == []  # the old disk's keys are gone with it
        assert post(md, cloud_init_form(guest.id, new)).text == "accepted\n"
    assert [e["key"] for e in shown(api, guest.id)] == canonical(new)
    assert rows(cell_db, guest.id) == [("phone_home", "accepted")] * 2


def test_a_server_not_launched_yet_is_told_to_come_back(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
) -> None:
    guest = boot(api, cloud)
    cell_db.run(
        lambda session: session.execute(
            update(Instance).where(Instance.uuid == guest.id).values(launched_at=None)
        ),
        write=True,
    )
    with guest.client(metadata_url) as md:
        r = post(md, cloud_init_form(guest.id, host_key_set()))
    assert r.status_code == 409 and "has not finished building" in r.text
    assert rows(cell_db, guest.id) == []


def test_a_guest_reports_for_itself_only(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
) -> None:
    attacker, victim = boot(api, cloud), boot(api, cloud)
    forged = {
        "X-Instance-ID": victim.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, victim.id),
        "X-Forwarded-For": victim.address,
        "Forwarded": f"for={victim.address}",
    }
    with attacker.client(metadata_url) as md:
        # Another instance's id in the form: refused, with or without forged headers.
        for headers in ({}, forged):
            r = post(md, cloud_init_form(victim.id, host_key_set()), **headers)
            assert r.status_code == 403 and "its own host keys only" in r.text
        # Forged headers do not make the attacker anyone else: its own id is its own report.
        assert post(md, cloud_init_form(attacker.id, host_key_set()), **forged).status_code == 200
    assert rows(cell_db, victim.id) == []
    assert shown(api, victim.id) == []
    assert rows(cell_db, attacker.id) == [("phone_home", "accepted")]
    # An unknown caller (no instance has the address) learns nothing.
    with Guest("nobody", "127.0.0.200", "").client(metadata_url) as md:
        assert post(md, cloud_init_form(victim.id, host_key_set())).status_code == 404


def test_proxy_mode_signed_headers_name_the_caller(
    api: httpx.Client,
    cloud: Cloud,
    metadata_server: MetadataServer,
    cell_db: Database,
) -> None:
    guest, other = boot(api, cloud), boot(api, cloud)
    signed = {
        "X-Instance-ID": guest.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, guest.id),
    }
    found = host_key_set()
    with metadata_server(NEUTRON) as url, httpx.Client(base_url=url, timeout=10) as md:
        bad_signature = {**signed, "X-Instance-ID-Signature": sign("wrong", guest.id)}
        assert post(md, cloud_init_form(guest.id, found), **bad_signature).status_code == 403
        other_named = {**signed, "X-Instance-ID": other.id}
        assert post(md, cloud_init_form(other.id, found), **other_named).status_code == 403
        assert post(md, cloud_init_form(guest.id, found)).status_code == 400  # no headers
        assert post(md, cloud_init_form(other.id, found), **signed).status_code == 403
        assert rows(cell_db, guest.id) == rows(cell_db, other.id) == []
        assert post(md, cloud_init_form(guest.id, found), **signed).text == "accepted\n"
        assert post(md, cloud_init_form(guest.id, found), **signed).text == "repeat\n"
    assert [e["key"] for e in shown(api, guest.id)] == canonical(found)
    assert shown(api, other.id) == []


def test_tokens_apply_as_to_every_document(
    api: httpx.Client,
    cloud: Cloud,
    metadata_server: MetadataServer,
) -> None:
    guest = boot(api, cloud)
    body = cloud_init_form(guest.id, host_key_set())
    with (
        metadata_server(("metadata", {"require_token": True})) as url,
        guest.client(url) as md,
    ):
        assert post(md, body).status_code == 401
        token = md.put(
            "/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        ).text
        assert post(md, body, **{"X-aws-ec2-metadata-token": token}).status_code == 200


HOSTILE: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("not-a-form", b'{"instance_id": 1}', {"Content-Type": "application/json"}, 400, "form"),
    ("not-ascii", "instance_id=\u00e9".encode(), FORM, 400, "ASCII"),
    ("lone-surrogate", b"hostname=%ED%A0%80&instance_id={id}", FORM, 400, "UTF-8"),
    ("raw-surrogate-bytes", b"hostname=\xed\xa0\x80&instance_id={id}", FORM, 400, "ASCII"),
    ("nul", b"hostname=vm%001&instance_id={id}&pub_key_ed25519={ed}", FORM, 400, "control"),
    ("digits-id", b"instance_id=" + b"9" * 5000, FORM, 403, "own host keys"),
    ("digits-key", b"instance_id={id}&pub_key_rsa=" + b"9" * 5000, FORM, 400, "pub_key_rsa"),
    (
        "digits-name",
        b"instance_id={id}&pub_key_ed25519={ed}&fqdn=" + b"9" * 5000,
        FORM,
        400,
        "fqdn",
    ),
    (
        "invalid-key",
        b"instance_id={id}&pub_key_ed25519=ssh-ed25519+AAAAC3Nz",
        FORM,
        400,
        "not a valid",
    ),
    ("wrong-field", b"instance_id={id}&pub_key_rsa={ed}", FORM, 400, "holds a ssh-ed25519"),
    ("no-key", b"instance_id={id}&pub_key_rsa=N%2FA", FORM, 400, "no host key"),
    ("twice", b"instance_id={id}&instance_id={id}", FORM, 400, "more than once"),
    ("many-fields", b"&".join([b"x=1"] * 100), FORM, 400, "more than 32 fields"),
    ("huge", b"instance_id=" + b"x" * (1 << 20), FORM, 413, "too large"),
]


@pytest.mark.parametrize(
    ("name", "body", "headers", "status", "why"), HOSTILE, ids=[h[0] for h in HOSTILE]
)
def test_hostile_reports_are_refused_and_store_nothing(
    name: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
    why: str,
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
    cell_db: Database,
) -> None:
    guest = boot(api, cloud)
    ed = urlencode({"k": keys.ed25519_public()})[2:].encode()
    content = body.replace(b"{id}", guest.id.encode()).replace(b"{ed}", ed)
    with guest.client(metadata_url) as md:
        r = md.post(PHONE_HOME, content=content, headers=headers)
        assert (r.status_code, why in r.text) == (status, True), r.text
        if status == 413:
            assert r.headers["connection"] == "close"
        # The service is fine afterwards, on a new connection.
        assert md.get("/openstack/latest/meta_data.json").status_code == 200
        assert md.get(PHONE_HOME).status_code == 405
    assert rows(cell_db, guest.id) == []


# -- the API ---------------------------------------------------------------------------------


def test_host_keys_resource_policy_and_versions(
    api: httpx.Client,
    cloud: Cloud,
    metadata_url: str,
) -> None:
    guest = boot(api, cloud)
    with guest.client(metadata_url) as md:
        assert post(md, cloud_init_form(guest.id, host_key_set())).status_code == 200
    url = f"/v2.1/servers/{guest.id}/host-keys"
    expected = shown(api, guest.id)
    assert len(expected) == 3
    for version in ("2.1", "2.37", "2.104", "2.105", "latest"):
        assert api.get(url, headers=mv(version)).json() == {"host_keys": expected}
    assert shown(api, guest.id, **ADMIN) == expected
    assert api.get(f"/v2.1/proj/servers/{guest.id}/host-keys").json()["host_keys"] == expected
    assert api.get(f"/v2.1/other/servers/{guest.id}/host-keys").status_code == 400
    r = api.get(url, headers=MALLORY)
    assert r.status_code == 404 and r.json()["itemNotFound"]["code"] == 404
    r = api.post(url, json={})
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert (
        api.get("/v2.1/servers/00000000-0000-0000-0000-000000000000/host-keys").status_code == 404
    )
    assert api.delete(f"/v2.1/servers/{guest.id}").status_code == 204
    assert api.get(url).status_code == 404


# -- the identity token ------------------------------------------------------------------------


def test_the_identity_token_carries_the_accepted_fingerprints(
    api: httpx.Client,
    cloud: Cloud,
    servers: Identity,
) -> None:
    guest = boot(api, cloud)
    found = host_key_set()
    with guest.client(servers.metadata) as md:
        assert verify(servers.api, identity_token(md))["host_keys"] == []
        assert post(md, cloud_init_form(guest.id, found)).text == "accepted\n"
        assert post(md, cloud_init_form(guest.id, host_key_set())).text == "repeat\n"
        claims = verify(servers.api, identity_token(md))
    assert claims["host_keys"] == [
        parse_host_key(found[f]).fingerprint_sha256
        for f in ("pub_key_rsa", "pub_key_ecdsa", "pub_key_ed25519")
    ]
    assert claims["host_keys"] == [e["fingerprint_sha256"] for e in shown(api, guest.id)]
