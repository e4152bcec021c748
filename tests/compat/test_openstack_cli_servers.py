"""The real ``openstack`` command (python-openstackclient, in its own venv) driving servers.

Same set-up as tests/compat/test_openstack_cli.py: a clouds.yaml with ``auth_type: admin_token``
(noauth2 token ``alice:proj``), ``compute_endpoint_override`` at cloudseed's ``/v2.1``, an
identity stub for OSC's identity v3 check, and a recording proxy in front of cloudseed so the
test sees what OSC sent. The cloud of tests/support/cloud.py: flavor ``1``, images ``cirros``
and ``debian``, network ``private``, key pairs ``key1`` and ``key2`` of alice.

What OSC 10.5 / openstacksdk 4.x do against cloudseed (max microversion 2.105):

* server commands negotiate **2.100**, the SDK's Server maximum (min(2.105, 2.100)); flavor
  look-ups 2.61; image look-ups carry no microversion. ``--os-compute-api-version 2.105`` or
  ``openstack.connect(compute_api_version="2.105")`` forces 2.105.
* With no catalog, the image and network proxies follow ``image_endpoint_override`` and
  ``network_endpoint_override``, which point at cloudseed's read-only Glance (``/image``) and
  Neutron (``/network``) slices: ``GET /image/v2/images/{id}`` names the image in
  ``server show``; ``GET /network/v2.0/networks/{id}`` then ``?name=`` resolves ``--network``.
  Without those overrides they would use the compute endpoint and fail.
* ``server create`` (``--image``, ``--network``, ``--key-name``, ``--user-data``),
  ``server show``, ``server rebuild`` (``--image``, ``--key-name``/``--no-key-name``,
  ``--user-data``/``--no-user-data``), ``server reboot --hard`` and ``server delete --wait`` work.
* OSC has no flag to change a server's user data (``server set`` has none). The equivalent is
  openstacksdk at 2.105, as in ``SDK_SCRIPT`` below: ``update_server(server, user_data=...)``
  (``PUT /servers/{id}``), or a hard reboot that carries ``user_data`` (for servers with a
  config drive, where the PUT is refused).

Only SQLite: each ``openstack`` run costs 1.5-3 s of client start-up, and the API's behaviour on
each backend is covered by tests/functional.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import osc
from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.osc_cli import TOKEN, Cli

pytestmark = [
    pytest.mark.compat,
    # Only SQLite, as in test_openstack_cli.py: the other backends are not even collected.
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]

ADMIN = {"X-Auth-Token": "admin:proj"}
OSC_VERSION = "2.100"  # what OSC negotiates for server commands against max 2.105

# The documented way to change a server's user data with openstacksdk (OSC has no flag for it).
# Run with the python of the venv OSC is installed in; clouds.yaml as for the CLI.
SDK_SCRIPT = """\
import base64
import sys

import openstack
from openstack import exceptions

conn = openstack.connect(cloud="cloudseed", compute_api_version="2.105")
server = conn.compute.find_server(sys.argv[1], ignore_missing=False)

# 1. Replace the user data in place (PUT /servers/{id} {"server": {"user_data": ...}}).
with open(sys.argv[2], "rb") as f:
    conn.compute.update_server(server, user_data=base64.b64encode(f.read()).decode())

# 2. Or hard-reboot with new user data (the way for servers with a config drive).
with open(sys.argv[3], "rb") as f:
    response = conn.compute.post(
        f"/servers/{server.id}/action", microversion="2.105",
        json={"reboot": {"type": "HARD", "user_data": base64.b64encode(f.read()).decode()}})
exceptions.raise_from_response(response)
print(server.id)
"""


def user_data_file(directory: Path, name: str, content: bytes) -> tuple[Path, str]:
    """A user data file and the base64 the API must store for it."""
    path = directory / name
    path.write_bytes(content)
    return path, base64.b64encode(content).decode()


def admin_show(api: httpx.Client, server_id: str) -> dict[str, Any]:
    """The server as an administrator sees it (``OS-EXT-SRV-ATTR:user_data`` needs 2.3+)."""
    r = api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv("2.105")})
    assert r.status_code == 200, r.text
    server: dict[str, Any] = r.json()["server"]
    return server


def user_data_history(api: httpx.Client, server_id: str) -> list[tuple[str, str | None]]:
    r = api.get(f"/v2.1/servers/{server_id}/bootstrap-history", headers=ADMIN)
    assert r.status_code == 200, r.text
    return [
        (c["action"], c["new"]["sha256"] if c["new"] else None)
        for c in r.json()["bootstrap_history"]
        if c["field"] == "user_data"
    ]


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def test_server_commands(
    cli: Cli,
    api: httpx.Client,
    cloud: Cloud,
    proxy: osc.RecordingProxy,
    identity: osc.IdentityStub,
    tmp_path: Path,
) -> None:
    ud1 = b"#cloud-config\nruncmd:\n  - [echo, one]\n"
    ud2 = gzip.compress(b"#!/bin/sh\necho two\n", mtime=0)  # binary: OSC must send it as is
    ud3, ud4 = b"#!/bin/sh\necho three\n", b"#!/bin/sh\necho four\n"
    files = {}
    for name, content in (("ud1", ud1), ("ud2", ud2), ("ud3", ud3), ("ud4", ud4)):
        files[name] = user_data_file(tmp_path, f"{name}.dat", content)

    # --- create: through the API, since `openstack server create --image` cannot work yet
    # (see test_server_create_with_key_and_user_data) -------------------------------------------
    server_id = create_server(
        api, cloud, version=OSC_VERSION, name="vm1", key_name="key1", user_data=files["ud1"][1]
    )["id"]
    wait_for(api, server_id, "ACTIVE")

    # --- show ---------------------------------------------------------------------------------
    shown = cli.json("server", "show", "vm1")
    assert shown["id"] == server_id
    assert shown["status"] == "ACTIVE"
    assert shown["key_name"] == "key1"
    assert shown["image"] == f"cirros ({cloud.image_id})"  # named through /image
    assert shown["OS-EXT-SRV-ATTR:user_data"] is None  # alice is no admin, as with Nova
    assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == files["ud1"][1]

    # --- list: the Image column is named through /image's "id=in:..." filter ------------------
    listed = {s["Name"]: s for s in cli.json("server", "list")}
    assert listed["vm1"]["Image"] == "cirros"
    # A name is looked up as an id first (404), then through the detailed list.
    assert proxy.last("GET", "/v2.1/servers/vm1").status == 404
    assert proxy.last("GET", "/v2.1/servers/detail?name=vm1").microversion == OSC_VERSION

    # --- rebuild with another image, key pair and user data -----------------------------------
    action = f"/v2.1/servers/{server_id}/action"
    rebuilt = cli.json(
        "server",
        "rebuild",
        "--image",
        cloud.image2_id,
        "--key-name",
        "key2",
        "--user-data",
        str(files["ud2"][0]),
        "vm1",
    )
    assert rebuilt["key_name"] == "key2"
    sent = proxy.last("POST", action)
    assert (sent.status, sent.microversion) == (202, OSC_VERSION)
    assert json.loads(sent.body) == {
        "rebuild": {"imageRef": cloud.image2_id, "key_name": "key2", "user_data": files["ud2"][1]}
    }
    # OSC looked the image up through the image service: cloudseed's Glance slice.
    assert proxy.last("GET", f"/image/v2/images/{cloud.image2_id}").status == 200
    wait_for(api, server_id, "ACTIVE")
    server = admin_show(api, server_id)
    assert server["image"]["id"] == cloud.image2_id
    assert server["key_name"] == "key2"
    assert server["OS-EXT-SRV-ATTR:user_data"] == files["ud2"][1]
    assert base64.b64decode(server["OS-EXT-SRV-ATTR:user_data"]) == ud2

    # --- rebuild without key pair and user data (and the current image) ------------------------
    cli("server", "rebuild", "--no-key-name", "--no-user-data", "vm1")
    assert json.loads(proxy.last("POST", action).body) == {
        "rebuild": {"imageRef": cloud.image2_id, "key_name": None, "user_data": None}
    }
    wait_for(api, server_id, "ACTIVE")
    server = admin_show(api, server_id)
    assert server["image"]["id"] == cloud.image2_id
    assert server["key_name"] is None
    assert server["OS-EXT-SRV-ATTR:user_data"] is None

    # --- hard reboot ----------------------------------------------------------------------------
    # Not --wait: OSC polls every 5 s, and the first poll usually sees HARD_REBOOT.
    cli("server", "reboot", "--hard", "vm1")
    sent = proxy.last("POST", action)
    assert json.loads(sent.body) == {"reboot": {"type": "HARD"}}
    assert (sent.status, sent.microversion) == (202, OSC_VERSION)
    assert wait_for(api, server_id, "ACTIVE")["OS-EXT-STS:power_state"] == 1

    # --- new user data: openstacksdk at 2.105 (OSC has no flag) -------------------------------
    script = tmp_path / "set_user_data.py"
    script.write_text(SDK_SCRIPT)
    out = cli.python(script, "vm1", str(files["ud3"][0]), str(files["ud4"][0]))
    assert out.stdout.strip() == server_id
    put = proxy.last("PUT", f"/v2.1/servers/{server_id}")
    assert (put.status, put.microversion) == (200, "2.105")
    assert json.loads(put.body) == {"server": {"user_data": files["ud3"][1]}}
    reboot = proxy.last("POST", action)
    assert (reboot.status, reboot.microversion) == (202, "2.105")
    assert json.loads(reboot.body) == {"reboot": {"type": "HARD", "user_data": files["ud4"][1]}}
    wait_for(api, server_id, "ACTIVE")
    assert admin_show(api, server_id)["OS-EXT-SRV-ATTR:user_data"] == files["ud4"][1]
    assert user_data_history(api, server_id) == [
        ("create", sha256(ud1)),
        ("rebuild", sha256(ud2)),
        ("rebuild", None),
        ("update", sha256(ud3)),
        ("reboot", sha256(ud4)),
    ]

    # --- delete ---------------------------------------------------------------------------------
    cli("server", "delete", "--wait", "vm1")
    assert proxy.last("DELETE", f"/v2.1/servers/{server_id}").status == 204
    assert proxy.last("GET", f"/v2.1/servers/{server_id}").status == 404  # --wait's poll
    assert api.get(f"/v2.1/servers/{server_id}").status_code == 404

    # --- what went over the wire ----------------------------------------------------------------
    api_calls = [r for r in proxy.requests if r.path.startswith("/v2.1/servers")]
    assert all(r.headers.get("x-auth-token") == TOKEN for r in api_calls)
    assert {r.microversion for r in api_calls} == {OSC_VERSION, "2.105"}
    assert all(r.headers.get("x-openstack-nova-api-version") == r.microversion for r in api_calls)
    assert identity.token_requests() == []
    assert len(cli.runs) <= 7


def test_server_create_with_key_and_user_data(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy, tmp_path: Path
) -> None:
    path, encoded = user_data_file(tmp_path, "ud.dat", b"#cloud-config\nruncmd: [[echo, hi]]\n")
    try:
        created = cli.json(
            "server",
            "create",
            "--image",
            cloud.image_id,
            "--flavor",
            "1",
            "--key-name",
            "key1",
            "--user-data",
            str(path),
            "--wait",
            "vm1",
        )
    finally:
        sent = proxy.last("POST", "/v2.1/servers")
        assert sent.microversion == OSC_VERSION
        body = json.loads(sent.body)["server"]
        assert (body["imageRef"], body["key_name"], body["user_data"]) == (
            cloud.image_id,
            "key1",
            encoded,
        )
        assert body["networks"] == "auto"  # no --network: OSC sends "auto" from 2.37 on
    assert created["status"] == "ACTIVE"
    assert created["key_name"] == "key1"
    assert admin_show(api, created["id"])["OS-EXT-SRV-ATTR:user_data"] == encoded


def test_server_create_on_a_named_network(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy
) -> None:
    created = cli.json(
        "server",
        "create",
        "--image",
        cloud.image_id,
        "--flavor",
        "1",
        "--network",
        "private",
        "--wait",
        "vm2",
    )
    body = json.loads(proxy.last("POST", "/v2.1/servers").body)["server"]
    assert body["networks"] == [{"uuid": cloud.network_id}]
    assert created["status"] == "ACTIVE"
    assert list(created["addresses"]) == ["private"]


def test_server_show_names_the_image(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy
) -> None:
    server_id = create_server(api, cloud, version=OSC_VERSION, name="vm3")["id"]
    wait_for(api, server_id, "ACTIVE")
    shown = cli.json("server", "show", server_id)
    assert proxy.last("GET", f"/image/v2/images/{cloud.image_id}").status == 200
    assert shown["image"] == f"cirros ({cloud.image_id})"


def test_server_tags(cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy) -> None:
    """``server set --tag``, ``server unset --tag`` and ``server list --tags`` (2.26)."""
    tagged = create_server(api, cloud, version="2.52", name="vm4", tags=["old"])["id"]
    other = create_server(api, cloud, version="2.52", name="vm5", tags=["web"])["id"]
    wait_for(api, tagged, "ACTIVE")
    wait_for(api, other, "ACTIVE")
    cli("server", "set", "--tag", "blue", "--tag", "web", "vm4")
    for tag in ("blue", "web"):
        sent = proxy.last("PUT", f"/v2.1/servers/{tagged}/tags/{tag}")
        assert (sent.status, sent.microversion) == (201, OSC_VERSION)
    cli("server", "unset", "--tag", "old", "vm4")
    assert proxy.last("DELETE", f"/v2.1/servers/{tagged}/tags/old").status == 204
    assert [s["Name"] for s in cli.json("server", "list", "--tags", "web,blue")] == ["vm4"]
    assert api.get(f"/v2.1/servers/{tagged}/tags", headers=mv("2.26")).json() == {
        "tags": ["blue", "web"]
    }
