"""Change notification on a real metadata service (in this process, with the session's API):
ETags and 304 on every document, long-polls that answer on a change or at their timeout,
strict parameters, caps, and a disconnect that gives the waiter's place back.
Across processes and workers on PostgreSQL: test_metadata_changes_serve.py."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cloudseed.db.engines import Database
from cloudseed.metadata.app import MetadataApp
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, b64, mv
from tests.support.guests import Guest, boot
from tests.support.metrics import scrape, value
from tests.support.server import running_metadata, running_metadata_app, with_options
from tests.support.waiting import eventually, wait_until

pytestmark = [pytest.mark.databases, pytest.mark.loopback_guests]

# Every document of both trees a guest with user data and a key pair has.
DOCUMENTS = [
    "/",
    "/ec2",
    "/latest",
    "/2009-04-04/meta-data/",
    "/latest/meta-data/hostname",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/user-data",
    "/latest/dynamic/instance-identity/document",
    "/openstack",
    "/openstack/latest",
    "/openstack/latest/?recursive=true",
    "/openstack/latest/meta_data.json",
    "/openstack/2012-08-10/meta_data.json",
    "/openstack/latest/user_data",
    "/openstack/latest/network_data.json",
    "/openstack/latest/password",
    "/openstack/latest/vendor_data.json",
    "/openstack/latest/vendor_data2.json",
]


@pytest.fixture()
def settings(migrated_settings: Settings, clean_cell_db: Database) -> Settings:
    return with_options(migrated_settings, "metadata", max_waiters_per_instance=4)


@pytest.fixture()
def metadata(settings: Settings, api_db: Database) -> Iterator[tuple[str, MetadataApp]]:
    """The service's URL, and its app: ``app.waiting(uuid)`` tells when a long-poll waits."""
    with running_metadata_app(settings, api_db=api_db) as running:
        yield running


@pytest.fixture()
def metadata_url(metadata: tuple[str, MetadataApp]) -> str:
    return metadata[0]


def waiting(app: MetadataApp, guest: Guest, count: int) -> None:
    """Return once ``count`` long-polls of ``guest`` wait in ``app`` (a change from now on
    wakes them; one before would answer them at once)."""
    wait_until(lambda: app.waiting(guest.id) == count, what=f"{count} long-polls waiting")


def rename(api: httpx.Client, guest: Guest, name: str) -> None:
    r = api.put(f"/v2.1/servers/{guest.id}", json={"server": {"name": name}}, headers=mv("2.37"))
    assert r.status_code == 200, r.text


WAIT = 30  # seconds: a long-poll's timeout_sec, unless a test needs its timeout


def wait_url(path: str, tag: str, timeout: int = WAIT) -> str:
    joint = "&" if "?" in path else "?"
    return f"{path}{joint}wait_for_change=true&last_etag={tag}&timeout_sec={timeout}"


def test_every_document_has_an_etag_and_answers_if_none_match(
    api: httpx.Client, cloud: Cloud, settings: Settings, api_db: Database, metadata_url: str
) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64("v1"))
    with running_metadata(settings, api_db=api_db) as second, guest.client(metadata_url) as md:
        with guest.client(second) as other:
            tags = {}
            for path in DOCUMENTS:
                r = md.get(path)
                assert r.status_code == 200, (path, r.text)
                tag = tags[path] = r.headers["etag"]
                assert tag.startswith('"') and tag.endswith('"'), path
                # The same tag from another worker, and on every request (meta_data.json's
                # random seed differs each time; its tag does not).
                assert other.get(path).headers["etag"] == tag, path
                assert md.get(path).headers["etag"] == tag, path
                for header in (tag, "*", f'"nope", {tag}', f"W/{tag}"):
                    r = md.get(path, headers={"If-None-Match": header})
                    assert r.status_code == 304, (path, header)
                    assert r.content == b""
                    assert r.headers["etag"] == tag
                    assert "content-type" not in r.headers
                r = md.head(path, headers={"If-None-Match": tag})
                assert r.status_code == 304, path
                r = md.get(path, headers={"If-None-Match": '"0-0000"'})
                assert r.status_code == 200, path
            # Each document its own tag, but "/" and "/ec2": the same bytes, digested.
            assert tags["/"] == tags["/ec2"]
            assert len(set(tags.values())) == len(DOCUMENTS) - 1
        rename(api, guest, "renamed")
        meta = "/openstack/latest/meta_data.json"
        r = md.get(meta, headers={"If-None-Match": tags[meta]})
        assert r.status_code == 200 and r.json()["name"] == "renamed"
        assert r.headers["etag"] != tags[meta]
        # Documents that are not the record's keep their tag.
        assert md.get("/openstack").headers["etag"] == tags["/openstack"]


# Longer than any test runs: the service reads the change feed once, at its start, and never
# again, NOTIFY or not; only the announcement of a change committed in this process can wake a
# waiter.
NO_FEED = {"change_poll_interval_ms": 3_600_000, "change_fallback_interval_ms": 3_600_000}


def test_long_poll_answers_on_a_change(
    api: httpx.Client, cloud: Cloud, settings: Settings, api_db: Database
) -> None:
    guest = boot(api, cloud, user_data=b64("v1"))
    quiet = with_options(settings, "metadata", **NO_FEED)
    # Sharing the API database of the API the rename goes through: its announcer.
    with running_metadata_app(quiet, api_db=api_db) as (url, app), guest.client(url) as md:
        for path in ("/openstack/latest/meta_data.json", "/openstack/latest/?recursive=true"):
            first = md.get(path)
            tag = first.headers["etag"]
            answers: list[tuple[float, httpx.Response]] = []

            def wait(
                path: str = path,
                tag: str = tag,
                answers: list[tuple[float, httpx.Response]] = answers,
            ) -> None:
                r = md.get(wait_url(path, tag, timeout=WAIT))
                answers.append((time.monotonic(), r))

            waiter = threading.Thread(target=wait)
            waiter.start()
            waiting(app, guest, 1)
            assert not answers  # still waiting
            name = f"n-{len(path)}"
            rename(api, guest, name)
            changed = time.monotonic()
            waiter.join(WAIT + 10)
            ((answered, r),) = answers
            assert r.status_code == 200
            assert r.headers["etag"] != tag
            body = r.json()
            meta = body if "uuid" in body else body["meta_data.json"]
            # The new name before the wait's timeout, with the feed an hour away: the
            # announcement of the change committed in this process woke the waiter.
            assert meta["name"] == name
            assert answered - changed < WAIT


def test_long_poll_answers_at_once_when_the_tag_differs_and_at_its_timeout(
    api: httpx.Client, cloud: Cloud, metadata_url: str
) -> None:
    guest = boot(api, cloud, user_data=b64("v1"))
    path = "/openstack/latest/user_data"
    with guest.client(metadata_url) as md:
        tag = md.get(path).headers["etag"]
        start = time.monotonic()
        r = md.get(wait_url(path, '"0-old"'))
        assert r.status_code == 200 and r.content == b"v1" and time.monotonic() - start < 1
        start = time.monotonic()
        r = md.get(wait_url(path, tag, timeout=1))
        took = time.monotonic() - start
        assert r.status_code == 200 and r.content == b"v1" and r.headers["etag"] == tag
        assert 1 <= took < 3
        # The tag without its quotes, as GCE's clients pass it, waits the same.
        start = time.monotonic()
        assert md.get(wait_url(path, tag.strip('"'), timeout=1)).status_code == 200
        assert time.monotonic() - start >= 1
        # With If-None-Match naming the tag, a wait that times out is a 304.
        r = md.get(wait_url(path, tag, timeout=1), headers={"If-None-Match": tag})
        assert r.status_code == 304


def test_invalid_parameters_are_400(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud)
    path = "/openstack/latest/meta_data.json"
    cases = [
        ("wait_for_change=maybe", "wait_for_change must be true or false"),
        ("wait_for_change=true&timeout_sec=0", "timeout_sec must be >= 1"),
        ("wait_for_change=true&timeout_sec=3601", "timeout_sec must be <= 3600"),
        ("wait_for_change=true&timeout_sec=" + "9" * 5000, "timeout_sec must be <= 3600"),
        ("wait_for_change=true&timeout_sec=ten", "timeout_sec must be an integer"),
        ("wait_for_change=true&last_etag=%ED%A0%80", "not valid UTF-8"),
        ("wait_for_change=true&last_etag=" + "x" * 200, "last_etag must be"),
        ("timeout_sec=5", "need wait_for_change=true"),
    ]
    with guest.client(metadata_url) as md:
        for query, message in cases:
            r = md.get(f"{path}?{query}")
            assert r.status_code == 400, (query, r.text)
            assert message in r.text
        r = md.get("/openstack/latest/user_data?recursive=true")
        assert r.status_code == 400 and "only for /openstack/<version>/" in r.text
        # The EC2 tree has no long-polls: its queries mean nothing, as before.
        assert md.get("/latest/meta-data/hostname?wait_for_change=maybe").status_code == 200


def test_a_waiter_hears_only_of_its_own_instance_and_needs_its_token(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp]
) -> None:
    metadata_url, app = metadata
    mine = boot(api, cloud)
    other = boot(api, cloud)
    path = "/openstack/latest/meta_data.json"
    with mine.client(metadata_url) as md, other.client(metadata_url) as theirs:
        tag = md.get(path).headers["etag"]
        answers: list[httpx.Response] = []
        waiter = threading.Thread(target=lambda: answers.append(md.get(wait_url(path, tag, 5))))
        waiter.start()
        waiting(app, mine, 1)
        rename(api, other, "someone-else")
        # The other instance's change has reached this service (its documents show it): a
        # waiter woken by it would have answered by now, with its own document.
        wait_until(
            lambda: theirs.get(path).json()["name"] == "someone-else", what="the rename served"
        )
        assert not answers and app.waiting(mine.id) == 1
        waiter.join(10)
        (r,) = answers
        assert r.headers["etag"] == tag and r.json()["uuid"] == mine.id
        # Tokens exactly as for any request: required for this instance, then accepted.
        r = api.put(
            f"/v2.1/servers/{mine.id}/metadata/metadata_http_tokens",
            json={"meta": {"metadata_http_tokens": "required"}},
        )
        assert r.status_code == 200, r.text
        wait_until(lambda: md.get(path).status_code == 401, what="tokens required")
        assert md.get(wait_url(path, tag, 1)).status_code == 401
        token = md.put("/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        header = {"X-aws-ec2-metadata-token": token.text}
        r = md.get(wait_url(path, tag, 1), headers=header)
        assert r.status_code == 200 and r.json()["uuid"] == mine.id


def raw_wait(url: str, source: str, path: str) -> socket.socket:
    """A long-poll sent on a plain socket, so the test can hang up on it."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), source_address=(source, 0))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: md\r\n\r\n".encode())
    return sock


def test_waiters_are_capped_and_a_disconnect_gives_the_place_back(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp]
) -> None:
    metadata_url, app = metadata
    guest = boot(api, cloud)
    path = "/openstack/latest/meta_data.json"
    with guest.client(metadata_url) as md:
        tag = md.get(path).headers["etag"].strip('"')
        socks = [raw_wait(metadata_url, guest.address, wait_url(path, tag)) for _ in range(4)]
        waiting(app, guest, 4)
        r = md.get(wait_url(path, tag, 1))
        assert r.status_code == 503
        assert "This instance already has 4 requests waiting for a change." in r.text
        socks.pop().close()  # the client goes away: its waiter is released at once
        waiting(app, guest, 3)
        start = time.monotonic()
        assert md.get(wait_url(path, tag, 1)).status_code == 200
        assert time.monotonic() - start >= 1  # it waited
        # A change answers everyone still waiting.
        rename(api, guest, "all-at-once")
        for sock in socks:
            sock.settimeout(5)
            head = sock.recv(65536)
            assert head.startswith(b"HTTP/1.1 200 "), head
            sock.close()


def test_recursive_view(api: httpx.Client, cloud: Cloud, metadata_url: str) -> None:
    guest = boot(api, cloud, key_name="key1", user_data=b64("v1"))
    with guest.client(metadata_url) as md:
        r = md.get("/openstack/latest/?recursive=true")
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        body = r.json()
        meta = md.get("/openstack/latest/meta_data.json").json()
        meta.pop("random_seed")
        assert body["meta_data.json"] == meta
        assert body["user_data"] == b64("v1")
        assert body["network_data.json"] == md.get("/openstack/latest/network_data.json").json()
        assert body["vendor_data.json"] == md.get("/openstack/latest/vendor_data.json").json()
        assert set(body) == {"meta_data.json", "user_data", "network_data.json", "vendor_data.json"}
        old = md.get("/openstack/2013-04-04/?recursive=true").json()
        assert set(old) == {"meta_data.json", "user_data"}
        assert json.dumps(old)  # plain JSON


def user_data_answers(base: str) -> float:
    """How many times the service has answered ``/openstack/<v>/user_data`` (its metrics)."""
    return value(scrape(base), "cloudseed_metadata_documents_total", document="openstack/user_data")


EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "cloudseed-watch.sh"


def test_the_guest_example_reruns_its_hook_on_a_change(
    api: httpx.Client, cloud: Cloud, metadata: tuple[str, MetadataApp], tmp_path: Path
) -> None:
    """docs/examples/cloudseed-watch.sh with curl, against this service: the hook runs once
    the user data changes (not at start, not for a change of something else)."""
    metadata_url, app = metadata
    guest = boot(api, cloud, user_data=b64("v1"))
    out = tmp_path / "seen"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\ncat "$1" >> {out}\n')
    hook.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "METADATA_URL": metadata_url,
        "WATCH_STATE": str(tmp_path / "state"),
        "WATCH_TIMEOUT": "30",
        "WATCH_CURL_OPTS": f"--interface {guest.address}",
        "WATCH_ONCE": "1",
    }
    watcher = subprocess.Popen(["sh", str(EXAMPLE), str(hook)], env=env)
    try:

        def watching() -> bool:
            assert watcher.poll() is None, "the watcher ended"
            return app.waiting(guest.id) == 1

        wait_until(watching, timeout=10, what="the watcher's long-poll waiting")
        rename(api, guest, "not-the-user-data")
        # The rename moves every tag of the record: the watcher's long-poll is answered with
        # the same user data, and once it waits again it has compared and kept its hook.
        wait_until(
            lambda: user_data_answers(metadata_url) == 2 and watching(),
            timeout=10,
            what="the watcher answered and waiting again",
        )
        assert not out.exists() and watcher.poll() is None
        r = api.put(
            f"/v2.1/servers/{guest.id}",
            json={"server": {"user_data": b64("v2")}},
            headers=mv("2.105"),
        )
        assert r.status_code == 200, r.text
        assert watcher.wait(timeout=10) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert out.read_text() == "v2"


def test_a_key_expiring_moves_the_tag_and_ends_a_long_poll(
    api: httpx.Client, cloud: Cloud, clean_cell_db: Database, metadata_url: str
) -> None:
    """A key that expires changes the documents with no change of the record (no generation,
    no feed row): the tag moves all the same, and a waiter answers at the expiry."""
    from tests.support.live_keys import at, entry, set_keys

    guest = boot(api, cloud, key_name="key1")
    set_keys(
        clean_cell_db,
        guest.id,
        [entry("key1", cloud.key1, expires_at=at(2)), entry("key2", cloud.key2)],
    )
    path = "/openstack/latest/meta_data.json"
    with guest.client(metadata_url) as md:
        eventually(lambda: len(md.get(path).json()["keys"]) == 2)
        tag = md.get(path).headers["etag"]
        start = time.monotonic()
        r = md.get(wait_url(path, tag, timeout=20))
        assert r.status_code == 200 and time.monotonic() - start < 5  # not the timeout
        assert [k["name"] for k in r.json()["keys"]] == ["key2"]
        assert r.headers["etag"] != tag
        assert md.get(path, headers={"If-None-Match": tag}).status_code == 200
