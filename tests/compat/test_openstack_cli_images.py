"""The real ``openstack image`` commands (python-openstackclient, in its own venv) against
cloudseed's Glance slice: create with ``--file`` (POST, then PUT of the data), show, list,
delete, and a server booted from the new image.

Same set-up as tests/compat/test_openstack_cli_servers.py: ``image_endpoint_override`` points
OSC's image proxy at ``/image`` on the compute API's port, through a recording proxy. Only
SQLite, as there; the API's behaviour on each backend is tests/functional/test_glance_api.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest

from tests.support import osc
from tests.support.cloud import Cloud, wait_for
from tests.support.osc_cli import Cli

pytestmark = [
    pytest.mark.compat,
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

BOB = {"X-Auth-Token": "bob:other"}


def test_image_create_upload_and_delete(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy, tmp_path: Path
) -> None:
    data = bytes(range(256)) * 64  # 16 KiB of raw disk
    disk = tmp_path / "disk.raw"
    disk.write_bytes(data)
    created = cli.json(
        "image",
        "create",
        "--file",
        str(disk),
        "--disk-format",
        "raw",
        "--container-format",
        "bare",
        "--min-ram",
        "1024",
        "--private",
        "--property",
        "os_distro=debian",
        "mine",
    )
    image_id = created["id"]
    sent = json.loads(proxy.last("POST", "/image/v2/images").body)
    assert (sent["name"], sent["disk_format"], sent["visibility"]) == ("mine", "raw", "private")
    upload = proxy.last("PUT", f"/image/v2/images/{image_id}/file")
    assert upload.status == 204 and upload.body == data

    shown = cli.json("image", "show", image_id)
    assert (shown["status"], shown["size"], shown["min_ram"]) == ("active", len(data), 1024)
    assert shown["checksum"] == hashlib.md5(data).hexdigest()
    assert shown["visibility"] == "private" and shown["owner"] == "proj"
    listed = {i["ID"]: i["Name"] for i in cli.json("image", "list")}
    assert listed[image_id] == "mine" and cloud.image_id in listed
    # Another project does not see it.
    assert api.get(f"/image/v2/images/{image_id}", headers=BOB).status_code == 404

    # A server boots from it (the flavor's 512 MiB is below min_ram: Nova's 400 first).
    body = {"server": {"name": "vm", "imageRef": image_id, "flavorRef": "1"}}
    r = api.post("/v2.1/servers", json=body)
    assert r.status_code == 400 and "memory is too small" in r.text, r.text

    cli("image", "delete", image_id)
    assert proxy.last("DELETE", f"/image/v2/images/{image_id}").status == 204
    assert api.get(f"/image/v2/images/{image_id}").status_code == 404
    assert image_id not in {i["ID"] for i in cli.json("image", "list")}


def test_a_server_boots_from_an_uploaded_image(
    cli: Cli, api: httpx.Client, cloud: Cloud, tmp_path: Path
) -> None:
    disk = tmp_path / "small.raw"
    disk.write_bytes(b"\0" * 4096)
    image_id = cli.json("image", "create", "--file", str(disk), "--disk-format", "raw", "small")[
        "id"
    ]
    server = cli.json("server", "create", "--image", "small", "--flavor", "1", "--wait", "vm")
    assert server["status"] == "ACTIVE"
    assert wait_for(api, server["id"], "ACTIVE")["image"]["id"] == image_id
