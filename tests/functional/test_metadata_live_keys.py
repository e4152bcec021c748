"""Live keys (2.106) as guests see them, on every database backend: every current key in both
trees, keys that expire while cached, ``/openstack/latest/authorized_keys`` (identified like
every other document), and the delivery state the metadata service records.

The compute API of 2.106 is another helper's: these tests write the stored form
(``instance_extra.keypairs`` entries and the ``keys_*`` columns) directly, in one transaction
with ``records.guest_changed`` as every real change is written.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine

from cloudseed.db.base import utcnow
from cloudseed.db.engines import Database
from cloudseed.servers.models import InstanceExtra
from cloudseed.signing import sign
from tests.support import keys
from tests.support.cloud import Cloud
from tests.support.guests import SECRET, Guest, MetadataServer, boot
from tests.support.live_keys import PROJECT_KEY, at, delivery, entry, set_keys
from tests.support.waiting import eventually, wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

KEYS = "/openstack/latest/authorized_keys"
META = "/openstack/latest/meta_data.json"
EC2_KEYS = "/latest/meta-data/public-keys/"
EXTRA_KEY = keys.ed25519_public("extra")
GONE_KEY = keys.ed25519_public("gone")


@contextmanager
def applied_writes() -> Iterator[list[str]]:
    """Every UPDATE of keys_applied_generation this process sends (the metadata service of
    these tests runs in this process), each with its parameters (``writes_of``)."""
    seen: list[str] = []
    lock = threading.Lock()

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE") and "keys_applied_generation" in (
            statement
        ):
            with lock:
                seen.append(f"{statement} {parameters!r}")

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def writes_of(writes: list[str], uuid: str) -> int:
    """How many of ``writes`` (``applied_writes``) were for instance ``uuid``."""
    return sum(uuid in write for write in writes)


def login_recorded(cell: Database, marker: Guest, md: httpx.Client, generation: int) -> None:
    """``marker`` gets key generation ``generation`` and logs in; wait until that is recorded.
    The metadata worker writes its marks in the order it made them, so by then every mark it
    made before this one has been written: what a test says was not recorded had its chance."""
    set_keys(cell, marker.id, keys_generation=generation, keys_boot_generation=1)
    assert md.get(KEYS).status_code == 200
    wait_until(
        lambda: delivery(cell, marker.id) == (generation, "login-time check"),
        what=f"the marker's login at generation {generation} recorded",
    )


@pytest.fixture()
def guest(api: httpx.Client, cloud: Cloud, clean_cell_db: Database) -> Guest:
    """A server booted with key1, then given three keys: its own two and a project key."""
    made = boot(api, cloud, key_name="key1")
    set_keys(
        clean_cell_db,
        made.id,
        [
            entry("key1", cloud.key1),
            entry("key2", cloud.key2, expires_at=at(3600)),
            entry("gone", GONE_KEY, expires_at=at(-60)),
            entry("team", PROJECT_KEY, source="project"),
        ],
    )
    return made


# -- what is served -----------------------------------------------------------------------------


def test_every_current_key_in_both_trees(guest: Guest, cloud: Cloud, metadata_url: str) -> None:
    with guest.client(metadata_url) as md:
        meta = md.get(META).json()
        assert meta["public_keys"] == {"key1": cloud.key1, "key2": cloud.key2, "team": PROJECT_KEY}
        assert list(meta["public_keys"]) == ["key1", "key2", "team"]
        assert [k["name"] for k in meta["keys"]] == ["key1", "key2", "team"]
        oldest = md.get("/openstack/2012-08-10/meta_data.json").json()
        assert oldest["public_keys"] == meta["public_keys"]
        assert md.get(EC2_KEYS).text == "0=key1\n1=key2\n2=team"
        for index, key in enumerate((cloud.key1, cloud.key2, PROJECT_KEY)):
            assert md.get(f"{EC2_KEYS}{index}").text == "openssh-key"
            assert md.get(f"{EC2_KEYS}{index}/openssh-key").text == key
        for missing in ("3", "3/openssh-key", "01/openssh-key", "0/other"):
            assert md.get(EC2_KEYS + missing).status_code == 404, missing
        r = md.get(KEYS)
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.text == f"{cloud.key1}\n{cloud.key2}\n{PROJECT_KEY}\n"
        assert GONE_KEY not in md.get("/latest/meta-data/public-keys/2/openssh-key").text


def test_keys_expire_while_cached(
    guest: Guest, cloud: Cloud, clean_cell_db: Database, metadata_url: str
) -> None:
    with guest.client(metadata_url) as md:
        # key1 expires a few seconds from now. A busy machine (CI's 2 cores under xdist) can
        # stall past a short window before the first answer: then the answer says nothing about
        # the service, and the test tries again with a longer one.
        for window in (2.0, 8.0, 30.0):
            expiry = time.time() + window
            set_keys(
                clean_cell_db,
                guest.id,
                [entry("key1", cloud.key1, expires_at=at(window)), entry("key2", cloud.key2)],
            )
            served = list(md.get(META).json()["public_keys"])
            keys_text = md.get(KEYS).text
            ec2_index = md.get(EC2_KEYS).text
            if time.time() < expiry:
                break
        assert served == ["key1", "key2"]
        assert keys_text == f"{cloud.key1}\n{cloud.key2}\n"
        assert ec2_index == "0=key1\n1=key2"
        # Nothing changes in the database: the cached guest drops the key when it expires.
        eventually(lambda: md.get(KEYS).text == f"{cloud.key2}\n", timeout=window + 5)
        assert time.time() >= expiry - 0.05  # not before its time (clock granularity aside)
        assert md.get(META).json()["public_keys"] == {"key2": cloud.key2}
        assert md.get(EC2_KEYS).text == "0=key2"
        assert md.get(f"{EC2_KEYS}0/openssh-key").text == cloud.key2
        assert md.get(f"{EC2_KEYS}1").status_code == 404


def test_no_keys(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    bare = boot(api, cloud)
    with bare.client(metadata_url) as md:
        r = md.get(KEYS)
        assert (r.status_code, r.content) == (200, b"")
        assert md.get(EC2_KEYS).status_code == 404
        assert "public_keys" not in md.get(META).json()


# -- the authorized_keys request ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_authorized_keys_request(guest: Guest, cloud: Cloud, metadata_url: str) -> None:
    expected = f"{cloud.key1}\n{cloud.key2}\n{PROJECT_KEY}\n"
    with guest.client(metadata_url) as md:
        # ?user= is for per-user keys to come: every login name gets the guest's keys.
        for user in ("root", "debian", "ad.user@EXAMPLE.ORG", "host$"):
            assert md.get(KEYS, params={"user": user}).text == expected, user
        assert md.get(KEYS + "?user=root&other=1").text == expected
        head = md.head(KEYS)
        assert (head.status_code, head.content) == (200, b"")
        assert md.post(KEYS).status_code == 405
        assert md.get("/openstack/2018-08-27/authorized_keys").status_code == 404
        assert md.get("/openstack/latest/authorized_keys/x").status_code == 404
        assert "authorized_keys" not in md.get("/openstack/latest").text
        for query in (
            "user=",
            "user=-oProxyCommand=x",
            "user=a%20b",
            "user=root%0Aroot",
            "user=%00",
            "user=..%2F..%2Fetc",
            "user=%FF",
            "user=root&user=debian",
            "user=" + "a" * 300,
            "user=%C3%A9",
            "&".join(["x=1"] * 50),
        ):
            r = md.get(f"{KEYS}?{query}")
            assert r.status_code == 400, query
            assert r.headers["content-type"] == "text/plain; charset=utf-8"
            assert cloud.key1 not in r.text


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_authorized_keys_are_the_callers_own(
    api: httpx.Client,
    cloud: Cloud,
    guest: Guest,
    metadata_url: str,
    metadata_server: MetadataServer,
) -> None:
    """Identified like every other document: the spoofing matrix's rows, read through
    authorized_keys (A is ``guest``; D, the victim, holds only key2)."""
    victim = boot(api, cloud, key_name="key2")
    mine = f"{cloud.key1}\n{cloud.key2}\n{PROJECT_KEY}\n"
    signed_d = {
        "X-Instance-ID": victim.id,
        "X-Tenant-ID": "proj",
        "X-Instance-ID-Signature": sign(SECRET, victim.id),
    }
    with guest.client(metadata_url) as md:
        for headers in (
            {"X-Forwarded-For": victim.address},
            {"Forwarded": f"for={victim.address}"},
            signed_d,
        ):
            assert md.get(KEYS, headers=headers).text == mine, headers
    with Guest("none", "127.0.0.97", "").client(metadata_url) as stranger:
        assert stranger.get(KEYS).status_code == 404
        assert stranger.get(KEYS, headers={"X-Forwarded-For": guest.address}).status_code == 404
    neutron = ("neutron", {"service_metadata_proxy": True, "metadata_proxy_shared_secret": SECRET})
    with metadata_server(neutron) as url, httpx.Client(base_url=url, timeout=10) as proxy:
        own = {
            "X-Instance-ID": guest.id,
            "X-Tenant-ID": "proj",
            "X-Instance-ID-Signature": sign(SECRET, guest.id),
        }
        assert proxy.get(KEYS, headers=own).text == mine
        assert proxy.get(KEYS, headers=signed_d).text == f"{cloud.key2}\n"
        assert proxy.get(KEYS, headers={**signed_d, "X-Instance-ID": guest.id}).status_code == 403
        assert proxy.get(KEYS, headers={**own, "X-Tenant-ID": "other"}).status_code == 404
        assert proxy.get(KEYS).status_code == 400
    with metadata_server(("metadata", {"require_token": True})) as url, guest.client(url) as md:
        refused = md.get(KEYS)
        assert (refused.status_code, refused.headers["www-authenticate"]) == (401, "Token")
        ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        token = md.put("/latest/api/token", headers=ttl).text
        assert md.get(KEYS, headers={"X-aws-ec2-metadata-token": token}).text == mine
        with victim.client(url) as other:
            theirs = other.put("/latest/api/token", headers=ttl).text
        assert md.get(KEYS, headers={"X-aws-ec2-metadata-token": theirs}).status_code == 401


# -- recording delivery ---------------------------------------------------------------------


def test_login_check_marks_each_generation_once(
    api: httpx.Client, guest: Guest, cloud: Cloud, clean_cell_db: Database, metadata_url: str
) -> None:
    marker = boot(api, cloud, key_name="key2")  # its logins show what came before was written
    # The guest fixture's keys are generation 1 = the boot set; the guest has not got them.
    set_keys(clean_cell_db, guest.id, keys_generation=3, keys_boot_generation=1)
    with (
        applied_writes() as writes,
        guest.client(metadata_url) as md,
        marker.client(metadata_url) as marker_md,
    ):
        for _ in range(20):
            assert md.get(KEYS, params={"user": "root"}).status_code == 200
        eventually(lambda: delivery(clean_cell_db, guest.id) == (3, "login-time check"))
        for _ in range(10):
            md.get(KEYS)
        login_recorded(clean_cell_db, marker, marker_md, generation=2)
        assert writes_of(writes, guest.id) == 1  # one conditional UPDATE for 30 logins
        # A HEAD delivers nothing; nor does a refused request.
        set_keys(clean_cell_db, guest.id, keys_generation=4)
        md.head(KEYS)
        md.get(KEYS + "?user=")
        login_recorded(clean_cell_db, marker, marker_md, generation=3)
        assert delivery(clean_cell_db, guest.id) == (3, "login-time check")
        assert writes_of(writes, guest.id) == 1
        md.get(KEYS)
        eventually(lambda: delivery(clean_cell_db, guest.id)[0] == 4)
    with clean_cell_db.read() as session:
        applied_at = session.scalar(
            select(InstanceExtra.keys_applied_at).where(InstanceExtra.instance_uuid == guest.id)
        )
    assert applied_at is not None and abs(applied_at - utcnow()) < dt.timedelta(minutes=1)


def test_metadata_marks_only_the_boot_generation(
    api: httpx.Client, cloud: Cloud, clean_cell_db: Database, metadata_url: str
) -> None:
    # Each guest's recorded read is the other's proof that what came before it was written:
    # the metadata worker writes its marks in the order it made them.
    first = boot(api, cloud, key_name="key1")
    second = boot(api, cloud, key_name="key2")
    with first.client(metadata_url) as md, second.client(metadata_url) as second_md:
        assert delivery(clean_cell_db, first.id) == (0, None)
        md.head(META)
        md.get("/openstack/latest/user_data")
        md.get("/latest/meta-data/instance-id")
        second_md.get(EC2_KEYS + "0/openssh-key")  # the EC2 tree counts too
        wait_until(
            lambda: delivery(clean_cell_db, second.id) == (1, "metadata"),
            what="the second guest's read of its EC2 keys recorded",
        )
        assert delivery(clean_cell_db, first.id) == (0, None)  # no keys served yet
        md.get(META)
        eventually(lambda: delivery(clean_cell_db, first.id) == (1, "metadata"))
    with second.client(metadata_url) as md, first.client(metadata_url) as first_md:
        # The keys changed after boot: cloud-init applies keys once, so reading them is no
        # proof the guest holds them (the login check is).
        set_keys(clean_cell_db, second.id, keys_generation=2, keys_boot_generation=1)
        md.get(META)
        md.get(EC2_KEYS)
        login_recorded(clean_cell_db, first, first_md, generation=2)
        assert delivery(clean_cell_db, second.id) == (1, "metadata")
        md.get(KEYS)
        eventually(lambda: delivery(clean_cell_db, second.id) == (2, "login-time check"))


def test_delivery_never_moves_backwards(
    api: httpx.Client,
    guest: Guest,
    cloud: Cloud,
    clean_cell_db: Database,
    metadata_server: MetadataServer,
) -> None:
    marker = boot(api, cloud, key_name="key2")  # its login shows the guest's mark was written
    # Generation 3, nothing applied, written before this metadata service first reads the
    # guest, and not announced: an announced change reaches this in-process service twice (at
    # commit, then again through the change feed), and when the feed's copy came after the
    # read below the guest was read again later, at generation 5, with nothing left to record
    # (seen under load on SQLite, every time on PostgreSQL). Nothing is loaded ahead, so the
    # service's first read of the guest is the request below.
    set_keys(clean_cell_db, guest.id, keys_generation=3, keys_boot_generation=1, announce=False)
    with (
        metadata_server(("metadata", {"load_ahead_seconds": 0})) as metadata_url,
        guest.client(metadata_url) as md,
        marker.client(metadata_url) as marker_md,
    ):
        md.get(META)  # cached at generation 3, nothing applied
        # Behind this worker's back (no change announced): generation 5, applied by the agent.
        set_keys(
            clean_cell_db,
            guest.id,
            keys_generation=5,
            keys_applied_generation=5,
            keys_applied_via="guest agent",
            announce=False,
        )
        with applied_writes() as writes:
            md.get(KEYS)  # serves generation 3 from its cache, and tries to record it
            login_recorded(clean_cell_db, marker, marker_md, generation=2)
            assert writes_of(writes, guest.id) == 1
        assert delivery(clean_cell_db, guest.id) == (5, "guest agent")
