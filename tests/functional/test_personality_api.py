"""Personality files whose contents are not base64 (issue 30), over real HTTP on every
backend: create and rebuild answer Nova's 400 before anything is written. The schema's
``base64`` format is Python's lenient decoder, which skips characters outside the alphabet,
so ``"!!!"`` passed it as zero bytes and the server was created with 202."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import httpx
import pytest

from cloudseed.db.engines import Database
from tests.support.cloud import Cloud, b64, create_server, mv, wait_for
from tests.support.snapshot import changes, snapshot

NOT_BASE64 = [
    "!!!",
    "Zm9v!",
    "Zm9v.YmFy",
    "Zm9vYg==Zm9v",  # data after the padding
    "Zm9vYg===",
    "Zm9v YmFy!",  # whitespace is skipped, the "!" is not
]

Unchanged = Callable[[], AbstractContextManager[None]]


@pytest.fixture()
def unchanged(api_db: Database, cell_db: Database) -> Unchanged:
    """Call it around a rejected request: ``with unchanged(): ...``."""

    @contextmanager
    def check() -> Iterator[None]:
        before = snapshot(api_db, cell_db)
        yield
        assert changes(before, snapshot(api_db, cell_db)) == []

    return check


def bad_request(path: str) -> dict[str, Any]:
    return {
        "badRequest": {"code": 400, "message": f"Personality content for {path} cannot be decoded."}
    }


def post_server(api: httpx.Client, cloud: Cloud, files: list[dict[str, str]]) -> httpx.Response:
    body = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", "personality": files}
    return api.post("/v2.1/servers", json={"server": body}, headers=mv("2.1"))


def rebuild(
    api: httpx.Client, server_id: str, cloud: Cloud, files: list[dict[str, str]]
) -> httpx.Response:
    return api.post(
        f"/v2.1/servers/{server_id}/action",
        json={"rebuild": {"imageRef": cloud.image2_id, "personality": files}},
        headers=mv("2.1"),
    )


@pytest.mark.parametrize("contents", NOT_BASE64)
def test_create_refuses_contents_that_are_not_base64(
    api: httpx.Client, cloud: Cloud, unchanged: Unchanged, contents: str
) -> None:
    with unchanged():
        r = post_server(api, cloud, [{"path": "/a", "contents": contents}])
    assert r.status_code == 400, r.text
    assert r.json() == bad_request("/a")
    assert api.get("/v2.1/servers").json()["servers"] == []


def test_the_first_bad_file_is_named(api: httpx.Client, cloud: Cloud, unchanged: Unchanged) -> None:
    files = [
        {"path": "/good", "contents": b64("fine")},
        {"path": "/etc/bad", "contents": "!!!"},
        {"path": "/worse", "contents": "???"},
    ]
    with unchanged():
        r = post_server(api, cloud, files)
    assert r.status_code == 400, r.text
    assert r.json() == bad_request("/etc/bad")


@pytest.mark.parametrize("contents", NOT_BASE64)
def test_rebuild_refuses_contents_that_are_not_base64(
    api: httpx.Client, cloud: Cloud, unchanged: Unchanged, contents: str
) -> None:
    server_id = create_server(api, cloud)["id"]
    wait_for(api, server_id, "ACTIVE")
    with unchanged():
        r = rebuild(api, server_id, cloud, [{"path": "/a", "contents": contents}])
    assert r.status_code == 400, r.text
    assert r.json() == bad_request("/a")
    server = wait_for(api, server_id, "ACTIVE")
    assert server["image"]["id"] == cloud.image_id


def test_base64_wrapped_over_lines_is_accepted(api: httpx.Client, cloud: Cloud) -> None:
    """What ``base64`` prints (76 columns, a final newline) and the empty file are base64."""
    text = b64("x" * 200)
    wrapped = "\n".join(text[i : i + 76] for i in range(0, len(text), 76)) + "\n"
    files = [{"path": "/wrapped", "contents": wrapped}, {"path": "/empty", "contents": ""}]
    r = post_server(api, cloud, files)
    assert r.status_code == 202, r.text
    server_id = r.json()["server"]["id"]
    wait_for(api, server_id, "ACTIVE")
    r = rebuild(api, server_id, cloud, files)
    assert r.status_code == 202, r.text
    assert wait_for(api, server_id, "ACTIVE")["image"]["id"] == cloud.image2_id
