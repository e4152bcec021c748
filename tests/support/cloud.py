"""A small cloud for server tests: a flavor, an image, a network, a key pair, and helpers to
create servers and wait for them."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.orm import Session

from cloudseed.db.engines import Database
from cloudseed.flavors import service as flavors
from cloudseed.images import service as images
from cloudseed.networks import service as networks
from cloudseed.web.microversions import APIVersion
from tests.support import keys
from tests.support.waiting import wait_until


@dataclass
class Cloud:
    image_id: str
    image2_id: str
    network_id: str
    key1: str
    key2: str


def make_cloud(api: httpx.Client, api_db: Database, tmp_path: Path) -> Cloud:
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"\0" * 4096)

    def work(session: Session) -> tuple[str, str, str]:
        flavors.add_flavor(session, name="m1.tiny", flavorid="1", vcpus=1, ram=512, disk=1)
        image = images.add_image(session, name="cirros", path=raw, disk_format="raw")
        image2 = images.add_image(session, name="debian", path=raw, disk_format="raw")
        net = networks.add_network(
            session, name="private", cidr="10.0.0.0/24", gateway="10.0.0.1", dns=["10.0.0.2"]
        )
        return image.uuid, image2.uuid, net.uuid

    ids = api_db.run(work, write=True)
    key1, key2 = keys.ed25519_public("one"), keys.ed25519_public("two")
    for name, key in (("key1", key1), ("key2", key2)):
        r = api.post("/v2.1/os-keypairs", json={"keypair": {"name": name, "public_key": key}})
        assert r.status_code == 200, r.text
    return Cloud(image_id=ids[0], image2_id=ids[1], network_id=ids[2], key1=key1, key2=key2)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def mv(version: str) -> dict[str, str]:
    return {"OpenStack-API-Version": f"compute {version}"}


def create_server(
    api: httpx.Client, cloud: Cloud, version: str = "2.1", **fields: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "vm", "imageRef": cloud.image_id, "flavorRef": "1", **fields}
    if APIVersion.parse(version) >= APIVersion(2, 37) and "networks" not in body:
        body["networks"] = "auto"
    r = api.post("/v2.1/servers", json={"server": body}, headers=mv(version))
    assert r.status_code == 202, r.text
    result: dict[str, Any] = r.json()["server"]
    return result


def wait_for(
    api: httpx.Client, server_id: str, status: str, *, version: str = "2.1", timeout: float = 20
) -> dict[str, Any]:
    """The server once it is ``status`` with no task running (polled every 20 ms)."""
    seen: list[str] = []

    def settled() -> dict[str, Any] | None:
        r = api.get(f"/v2.1/servers/{server_id}", headers=mv(version))
        assert r.status_code == 200, r.text
        server: dict[str, Any] = r.json()["server"]
        seen.append(server["status"])
        if server["status"] == status and server.get("OS-EXT-STS:task_state") is None:
            return server
        return None

    try:
        return wait_until(settled, timeout=timeout, interval=0.02, max_interval=0.02)
    except AssertionError:
        raise AssertionError(f"server {server_id} is {seen[-1]}, not {status}") from None
