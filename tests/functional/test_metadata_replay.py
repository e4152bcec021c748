"""Replayed answers (replay.py, coalescing.py): the same request from the same peer answered
from the bytes of the last answer, skipping the parser and the app; never to another caller,
never after the guest changed, and counted as any answer (metrics, the access audit)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.metadata.app import MetadataApp
from cloudseed.settings import Settings
from cloudseed.signing import sign
from tests.support.cloud import Cloud, b64, mv
from tests.support.guests import SECRET, Guest, boot
from tests.support.metrics import scrape, value
from tests.support.raw_http import (
    Connection,
    alike_but_the_seed,
    asked_at_once,
    head,
    without_date,
)
from tests.support.server import running_metadata_app, with_options
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

USER_DATA = "/openstack/latest/user_data"
HOSTNAME = "/latest/meta-data/hostname"


@pytest.fixture()
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the app was asked to answer at once (a replay does not ask it)."""
    return asked_at_once(monkeypatch, MetadataApp)


@pytest.fixture()
def metadata(
    migrated_settings: Settings, api_db: Database, asked: list[str]
) -> Iterator[tuple[str, MetadataApp]]:
    with running_metadata_app(migrated_settings, api_db=api_db) as running:
        yield running


@pytest.fixture()
def proxied(
    migrated_settings: Settings, api_db: Database, asked: list[str]
) -> Iterator[tuple[str, MetadataApp]]:
    settings = with_options(
        migrated_settings,
        "neutron",
        service_metadata_proxy=True,
        metadata_proxy_shared_secret=SECRET,
    )
    with running_metadata_app(settings, api_db=api_db) as running:
        yield running


def signed(guest: Guest, signature: str | None = None) -> list[str]:
    return [
        f"X-Instance-ID: {guest.id}",
        "X-Tenant-ID: proj",
        f"X-Instance-ID-Signature: {signature or sign(SECRET, guest.id)}",
    ]


def kept(app: MetadataApp, count: int) -> None:
    """Wait until ``app`` keeps ``count`` entries (an entry is kept just after its answer is
    written: the client may read it first)."""
    wait_until(lambda: len(app.replays) == count, what=f"{count} entries kept")


def test_the_same_request_again_is_replayed_as_answered_and_counted(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp], asked: list[str]
) -> None:
    url, app = metadata
    guest = boot(api, cloud, user_data=b64("#cloud-config\n"))
    raw = head(USER_DATA, "User-Agent: Cloud-Init/23.1", "Accept: */*")
    with Connection(url, guest.address) as conn:
        first = conn.ask(raw)  # loaded: the ASGI path (and asked at once first)
        second = conn.ask(raw)  # at once: kept
        kept(app, 1)
        before = value(
            scrape(url), "cloudseed_metadata_documents_total", document="openstack/user_data"
        )
        asked.clear()
        third = conn.ask(raw)
        fourth = conn.ask(raw)
        assert asked == []  # neither reached the app
        assert first[0] == 200 and first[2] == b"#cloud-config\n"
        assert (
            without_date(first)
            == without_date(second)
            == without_date(third)
            == without_date(fourth)
        )
        after = value(
            scrape(url), "cloudseed_metadata_documents_total", document="openstack/user_data"
        )
        assert after == before + 2
        # Another connection from the same guest: the same entry.
        with Connection(url, guest.address) as other:
            assert without_date(other.ask(raw)) == without_date(first)
        assert asked == []
        # meta_data.json: replayed with a new random seed each time (asked once more where
        # the first answer recorded the key's delivery).
        meta = "/openstack/latest/meta_data.json"
        answers = [conn.ask(head(meta)) for _ in range(5)]
        assert asked.count(meta) <= 2
        assert {a[1]["etag"] for a in answers} == {answers[0][1]["etag"]}
        alike_but_the_seed([a[2] for a in answers])
        # Asked with its ETag: the 304 is replayed, without a body.
        etag = f"If-None-Match: {answers[0][1]['etag']}"
        asked.clear()
        assert [conn.ask(head(meta, etag))[0:3:2] for _ in range(3)] == [(304, b"")] * 3
        assert asked == [meta]
        # vendor_data2.json without dynamic targets: asked once, then replayed.
        vendor = "/openstack/latest/vendor_data2.json"
        assert len({conn.ask(head(vendor))[2] for _ in range(3)}) == 1
        assert asked.count(vendor) == 1
        kept(app, 4)


def test_an_entry_answers_no_other_caller(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp], asked: list[str]
) -> None:
    url, app = metadata
    a = boot(api, cloud, user_data=b64("for a"))
    b = boot(api, cloud, user_data=b64("for b"))
    raw = head(USER_DATA)
    with Connection(url, a.address) as conn:
        for _ in range(3):
            assert conn.ask(raw)[2] == b"for a"
    kept(app, 1)
    # The very same bytes from B's address: B's own answer; from an unknown address: 404.
    with Connection(url, b.address) as from_b:
        assert from_b.ask(raw)[2] == b"for b"
        assert from_b.ask(raw)[2] == b"for b"
    with Connection(url, "127.0.0.250") as stranger:
        assert stranger.ask(raw)[0] == 404
        assert stranger.ask(raw)[0] == 404


def test_signed_headers_are_part_of_the_key(
    api: httpx.Client, cloud: Cloud, proxied: tuple[str, MetadataApp], asked: list[str]
) -> None:
    url, _app = proxied
    a = boot(api, cloud, user_data=b64("for a"))
    b = boot(api, cloud, user_data=b64("for b"))
    with Connection(url, "127.0.0.1") as conn:  # the proxy: one peer for every guest
        for _ in range(3):
            assert conn.ask(head(USER_DATA, *signed(a)))[2] == b"for a"
        asked.clear()
        assert conn.ask(head(USER_DATA, *signed(b)))[2] == b"for b"
        assert conn.ask(head(USER_DATA, *signed(b)))[2] == b"for b"
        # A's id with B's signature, a wrong tenant, a changed case: never A's replay.
        forged = [
            f"X-Instance-ID: {a.id}",
            "X-Tenant-ID: proj",
            f"X-Instance-ID-Signature: {sign(SECRET, b.id)}",
        ]
        assert conn.ask(head(USER_DATA, *forged))[0] == 403
        assert conn.ask(head(USER_DATA, *forged))[0] == 403
        other_tenant = [f"X-Instance-ID: {a.id}", "X-Tenant-ID: other", signed(a)[2]]
        assert conn.ask(head(USER_DATA, *other_tenant))[0] == 404
        lower = [line.lower() for line in signed(a)]
        asked.clear()
        assert conn.ask(head(USER_DATA, *lower))[2] == b"for a"
        assert asked == [USER_DATA]  # new bytes: asked, then kept under their own key


def test_a_change_to_the_guest_drops_its_entries(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp], asked: list[str]
) -> None:
    url, app = metadata
    guest = boot(api, cloud)
    raw = head(HOSTNAME)
    with Connection(url, guest.address) as conn:
        old = conn.ask(raw)
        assert without_date(conn.ask(raw)) == without_date(old)
        kept(app, 1)
        r = api.put(
            f"/v2.1/servers/{guest.id}",
            json={"server": {"hostname": "renamed"}},
            headers=mv("2.90"),
        )
        assert r.status_code == 200, r.text
        wait_until(lambda: len(app.replays) == 0, what="the entry dropped")
        new = conn.ask(raw)
        assert new[0] == 200 and new[2].startswith(b"renamed"), new


def test_pipelined_and_split_heads_are_answered_in_order(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp], asked: list[str]
) -> None:
    url, app = metadata
    guest = boot(api, cloud, user_data=b64("data"))
    raw = head(USER_DATA)
    with Connection(url, guest.address) as conn:
        for _ in range(2):
            conn.ask(raw)
        kept(app, 1)
        asked.clear()
        # Two heads in one read: the parser's way, both answered, nothing kept for the pair.
        conn.send(raw + head("/openstack"))
        assert conn.answer()[2] == b"data"
        assert conn.answer()[0] == 200
        assert asked == [USER_DATA, "/openstack"]
        # A head split over two reads, then one whole: the first parsed, the second replayed.
        conn.send(raw[:10])
        time.sleep(0.05)  # a separate read, most likely
        conn.send(raw[10:])
        assert conn.answer()[2] == b"data"
        assert conn.ask(raw)[2] == b"data"
        kept(app, 1)


def test_an_edited_vendordata_file_is_not_replayed(
    api: httpx.Client,
    cloud: Cloud,
    migrated_settings: Settings,
    api_db: Database,
    tmp_path: Path,
    asked: list[str],
) -> None:
    static = tmp_path / "vendor.json"
    static.write_text(json.dumps({"v": 1}))
    settings = with_options(
        migrated_settings,
        "api",
        vendordata_providers="StaticJSON",
        vendordata_jsonfile_path=str(static),
    )
    guest = boot(api, cloud)
    vendor = "/openstack/latest/vendor_data2.json"
    with (
        running_metadata_app(settings, api_db=api_db) as (url, app),
        Connection(url, guest.address) as conn,
    ):
        for _ in range(3):
            assert json.loads(conn.ask(head(vendor))[2]) == {"static": {"v": 1}}
        kept(app, 1)
        static.write_text(json.dumps({"v": 2, "edited": True}))
        # Re-read within the file's check interval (a second): never the old bytes after.
        wait_until(
            lambda: json.loads(conn.ask(head(vendor))[2])["static"].get("v") == 2,
            what="the edited file served",
        )
        assert json.loads(conn.ask(head(vendor))[2]) == {"static": {"v": 2, "edited": True}}
