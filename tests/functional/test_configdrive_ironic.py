"""A server's config drive in Ironic's two forms (2.108 and ``cloudseed configdrive build
--format ironic|ironic-json``): decoded and read back, the gzipped ISO is the drive the compute
agent attached, byte for byte but for the image's build times and the random seed (fresh per
drive); the JSON form holds the same documents. Policy, microversion and bad input through the
real API."""

from __future__ import annotations

import base64
import gzip
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from cloudseed.cli import cli
from cloudseed.configdrive import iso9660
from cloudseed.configdrive.service import drive_path
from cloudseed.settings import Settings
from tests.support.cloud import Cloud, b64, create_server, mv, wait_for
from tests.support.iso_dates import date_bytes, differences

ADMIN = {"X-Auth-Token": "admin:proj"}
AT = mv("2.108")
LATEST = "openstack/latest/"


def boot(api: httpx.Client, cloud: Cloud, **fields: Any) -> str:
    created = create_server(api, cloud, "2.37", config_drive=True, key_name="key1", **fields)
    wait_for(api, created["id"], "ACTIVE")
    return str(created["id"])


def drive_form(api: httpx.Client, server_id: str, fmt: str) -> Any:
    r = api.get(
        f"/v2.1/servers/{server_id}/config-drive",
        params={"format": fmt},
        headers={**ADMIN, **AT},
    )
    assert r.status_code == 200, r.text
    body = r.json()["config_drive"]
    assert body["format"] == fmt
    return body["configdrive"]


def unpacked(text: str) -> bytes:
    return gzip.decompress(base64.b64decode(text, validate=True))


def tree_of(image: bytes) -> dict[str, bytes]:
    return iso9660.read(io.BytesIO(image))


def seed_of(tree: dict[str, bytes]) -> bytes:
    return str(json.loads(tree[LATEST + "meta_data.json"])["random_seed"]).encode()


def assert_same_drive(built: bytes, attached: bytes) -> None:
    """The same image but for its build times and its random seed."""
    built_tree, attached_tree = tree_of(built), tree_of(attached)
    assert iso9660.label(io.BytesIO(built)) == "config-2"
    assert sorted(built_tree) == sorted(attached_tree)
    ours, theirs = seed_of(built_tree), seed_of(attached_tree)
    assert ours != theirs and len(ours) == len(theirs)
    assert {p: c.replace(ours, theirs) for p, c in built_tree.items()} == attached_tree
    dates = date_bytes(attached)
    assert date_bytes(built) == dates
    stray = [at for at in differences(built.replace(ours, theirs), attached) if at not in dates]
    assert stray == []


def cli_env(settings: Settings) -> dict[str, str]:
    return {
        "CLOUDSEED_API_DATABASE__CONNECTION": settings.api_database_url,
        "CLOUDSEED_DATABASE__CONNECTION": settings.cell_database_url,
        "CLOUDSEED_STATE_PATH": str(settings.state_dir),
    }


def cli_build(settings: Settings, server_id: str, *options: str) -> Any:
    return CliRunner().invoke(
        cli, ["configdrive", "build", server_id, *options], env=cli_env(settings)
    )


def test_ironic_forms_are_the_attached_drive(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings, tmp_path: Path
) -> None:
    user_data = b"#cloud-config\nruncmd: [[touch, /ok]]\n"
    sid = boot(
        api,
        cloud,
        user_data=base64.b64encode(user_data).decode(),
        metadata={"role": "metal"},
        personality=[{"path": "/etc/kept", "contents": b64("kept\n")}],
    )
    attached = drive_path(migrated_settings, sid).read_bytes()

    through_api = unpacked(drive_form(api, sid, "ironic"))
    assert_same_drive(through_api, attached)
    assert tree_of(through_api)[LATEST + "user_data"] == user_data
    assert tree_of(through_api)["openstack/content/0000"] == b"kept\n"  # carried over

    result = cli_build(migrated_settings, sid, "--format", "ironic")
    assert result.exit_code == 0, result.output
    assert_same_drive(unpacked(result.stdout.strip()), attached)
    out = tmp_path / "drive.b64"
    result = cli_build(migrated_settings, sid, "--format", "ironic", "--output", str(out))
    assert result.exit_code == 0 and f"wrote {out} (ironic)" in result.output
    assert_same_drive(unpacked(out.read_text().rstrip("\n")), attached)

    # Personality files have no place in the JSON form: refused, never dropped.
    r = api.get(f"/v2.1/servers/{sid}/config-drive?format=ironic-json", headers={**ADMIN, **AT})
    assert r.status_code == 409
    assert "personality files" in r.json()["conflictingRequest"]["message"]
    result = cli_build(migrated_settings, sid, "--format", "ironic-json")
    assert result.exit_code == 1 and "personality files" in result.output


def test_json_form_and_binary_user_data(
    api: httpx.Client, cloud: Cloud, migrated_settings: Settings
) -> None:
    text_id = boot(api, cloud, user_data=b64("#!/bin/sh\necho héllo\n"))
    attached = tree_of(drive_path(migrated_settings, text_id).read_bytes())
    form = drive_form(api, text_id, "ironic-json")
    assert sorted(form) == ["meta_data", "network_data", "user_data", "vendor_data"]
    meta = json.loads(attached[LATEST + "meta_data.json"])
    assert form["meta_data"].pop("random_seed") != meta.pop("random_seed")
    assert form["meta_data"] == meta
    assert form["meta_data"]["uuid"] == text_id
    assert form["network_data"] == json.loads(attached[LATEST + "network_data.json"])
    assert form["vendor_data"] == json.loads(attached[LATEST + "vendor_data2.json"])
    assert form["user_data"].encode() == attached[LATEST + "user_data"]
    result = cli_build(migrated_settings, text_id, "--format", "ironic-json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["user_data"] == "#!/bin/sh\necho héllo\n"

    # Gzip user data: the ISO carries it byte for byte, the JSON form (UTF-8 text) cannot.
    packed = gzip.compress(b"#cloud-config\n" * 100, mtime=0)
    binary_id = boot(api, cloud, user_data=base64.b64encode(packed).decode())
    image = unpacked(drive_form(api, binary_id, "ironic"))
    assert tree_of(image)[LATEST + "user_data"] == packed
    assert tree_of(image)["ec2/latest/user-data"] == packed
    r = api.get(
        f"/v2.1/servers/{binary_id}/config-drive?format=ironic-json", headers={**ADMIN, **AT}
    )
    assert r.status_code == 409
    assert "not UTF-8 text" in r.json()["conflictingRequest"]["message"]


@pytest.mark.parametrize(
    ("headers", "query", "status", "fault"),
    [
        ({**ADMIN, **mv("2.107")}, "format=ironic", 404, "itemNotFound"),
        ({**AT}, "format=ironic", 403, "forbidden"),  # alice, the owner
        ({**ADMIN, **AT}, "", 400, "badRequest"),
        ({**ADMIN, **AT}, "format=vfat", 400, "badRequest"),
        ({**ADMIN, **AT}, "format=ironic&x=1", 400, "badRequest"),
    ],
)
def test_policy_microversion_and_query(
    api: httpx.Client,
    cloud: Cloud,
    headers: dict[str, str],
    query: str,
    status: int,
    fault: str,
) -> None:
    sid = create_server(api, cloud, "2.37")["id"]
    r = api.get(f"/v2.1/servers/{sid}/config-drive?{query}", headers=headers)
    assert r.status_code == status, r.text
    body = r.json()
    assert list(body) == [fault] and body[fault]["code"] == status
    if status == 403:
        assert body[fault]["message"] == (
            "Policy doesn't allow cloudseed:servers:config-drive:show to be performed."
        )


def test_unknown_server_is_404(api: httpx.Client) -> None:
    r = api.get(
        "/v2.1/servers/00000000-0000-4000-8000-000000000000/config-drive?format=ironic",
        headers={**ADMIN, **AT},
    )
    assert r.status_code == 404
    assert "itemNotFound" in r.json()
