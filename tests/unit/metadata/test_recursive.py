"""The recursive view: each record document by name, no random seed, by version."""

from __future__ import annotations

import json

from cloudseed.metadata import recursive, render
from tests.support.guest_facts import facts


def view(version: str, *, vendor: bytes | None = None, **changes: object) -> dict[str, object]:
    guest = facts(**changes)
    body = recursive.instance_data(
        version,
        meta_data=render.meta_data(guest, version, dhcp_domain="novalocal"),
        user_data=guest.user_data,
        network_data=render.network_data(guest),
        vendor_data_json=vendor,
    )
    result: dict[str, object] = json.loads(body)
    return result


def test_latest() -> None:
    doc = view("2025-04-04", vendor=b'{"a": 1}', user_data="aGk=")
    meta = doc["meta_data.json"]
    assert isinstance(meta, dict) and "random_seed" not in meta and meta["uuid"]
    assert doc["user_data"] == "aGk="
    assert doc["vendor_data.json"] == {"a": 1}
    assert doc["network_data.json"] == json.loads(render.network_data(facts()))
    assert view("2025-04-04") == view("2025-04-04")  # no seed: the same bytes every time


def test_old_versions_and_no_user_data() -> None:
    assert set(view("2012-08-10", vendor=b"{}", user_data=None)) == {"meta_data.json", "user_data"}
    assert view("2012-08-10", user_data=None)["user_data"] is None
    assert set(view("2013-10-17", vendor=b"{}")) == {
        "meta_data.json",
        "user_data",
        "vendor_data.json",
    }
