"""cloudseed's openstack CLI plugin (clients/osc-plugin, ``cloudseed-osc``) with the real
python-openstackclient from PyPI, against a running cloudseed.

The venv is tests/support/osc_plugin.py's: OSC plus the plugin, reinstalled when the plugin's
sources change. This module's ``openstack`` fixture replaces the one of conftest.py, so its
``cli`` runs that venv's ``openstack``, with the same clouds.yaml, identity stub and recording
proxy as tests/compat/test_openstack_cli_servers.py (server commands negotiate 2.100 there).

What is checked: the options in ``openstack help``; ``server set --user-data/--no-user-data``
(one PUT at 2.105 holding only ``user_data``, next to the stock command's own changes); the 409
of a server with a config drive and its hint; ``server reboot --hard --user-data`` (exactly one
reboot action, carrying the user data); ``--user-data`` with a soft reboot refused before any
request; ``server rebuild --user-data`` refused below 2.57 and unchanged above; and a cloud
without 2.105 (a fake compute API) answered with "this cloud does not support updating user
data", never a traceback.

Live keys (2.106): ``server create`` and ``server rebuild`` with several ``--key-name`` (one
request at 2.106 with ``key_names``, checked in the server view; one ``--key-name`` stays the
stock request), ``server key list/add/remove/set`` on a running server (each change checked
through the API's ``key_names`` and ``keys``), ``project key list/set``, and a cloud without
2.106.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import keys, osc, osc_plugin
from tests.support.cloud import Cloud, create_server, mv, wait_for
from tests.support.osc_cli import TOKEN, Cli
from tests.support.osc_plugin import OSC_VERSION, no_traceback, sqlite_only
from tests.support.waiting import wait_until

pytestmark = pytest.mark.compat

ADMIN = {"X-Auth-Token": "admin:proj"}
PLUGIN_VERSION = "2.105"
UNSUPPORTED = "this cloud does not support updating user data"


@pytest.fixture(scope="session")
def openstack() -> Path:
    """OSC with cloudseed-osc installed (overrides conftest.py's stock OSC)."""
    return osc_plugin.openstack_or_skip()


def user_data_file(directory: Path, name: str, content: bytes) -> tuple[Path, str]:
    """A user data file, and the base64 the API must store for it."""
    path = directory / name
    path.write_bytes(content)
    return path, base64.b64encode(content).decode()


def stored_user_data(api: httpx.Client, server_id: str) -> str | None:
    """The server's user data as an administrator sees it (``OS-EXT-SRV-ATTR`` needs 2.3+)."""
    r = api.get(f"/v2.1/servers/{server_id}", headers={**ADMIN, **mv(PLUGIN_VERSION)})
    assert r.status_code == 200, r.text
    server: dict[str, Any] = r.json()["server"]
    value: str | None = server["OS-EXT-SRV-ATTR:user_data"]
    return value


def active_server(api: httpx.Client, cloud: Cloud, name: str, content: bytes, **fields: Any) -> str:
    server_id: str = create_server(
        api,
        cloud,
        version=OSC_VERSION,
        name=name,
        user_data=base64.b64encode(content).decode(),
        **fields,
    )["id"]
    wait_for(api, server_id, "ACTIVE")
    return server_id


def sent(proxy: osc.RecordingProxy, method: str, path: str) -> list[osc.Exchange]:
    return [r for r in proxy.requests if (r.method, r.path) == (method, path)]


@sqlite_only
def test_help_shows_the_new_options(cli: Cli) -> None:
    server_set = cli("help", "server", "set").stdout
    assert "[--user-data <user-data> | --no-user-data]" in server_set
    assert "Replace the server's user data with this file" in server_set
    assert "Remove the server's user data" in server_set
    assert "cloudseed-osc plugin" in server_set
    reboot = cli("help", "server", "reboot").stdout
    assert "[--user-data <user-data> | --no-user-data]" in reboot
    assert "With --hard: replace the server's user data" in reboot
    # The stock options are all still there.
    assert "--name <new-name>" in server_set
    assert "--hard" in reboot
    assert "--wait" in reboot


@sqlite_only
def test_server_set_user_data(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy, tmp_path: Path
) -> None:
    server_id = active_server(api, cloud, "vm1", b"#cloud-config\n{}\n")
    put = f"/v2.1/servers/{server_id}"
    gz = gzip.compress(b"#!/bin/sh\necho two\n", mtime=0)  # binary: must arrive as it is
    ud1, ud1_b64 = user_data_file(tmp_path, "ud1.gz", gz)
    ud2, ud2_b64 = user_data_file(tmp_path, "ud2.txt", b"#!/bin/sh\necho three\n")

    # --user-data alone: one PUT at 2.105 with only user_data; the stock part sends nothing.
    cli("server", "set", "--user-data", str(ud1), "vm1")
    [exchange] = sent(proxy, "PUT", put)
    assert (exchange.status, exchange.microversion) == (200, PLUGIN_VERSION)
    assert json.loads(exchange.body) == {"server": {"user_data": ud1_b64}}
    assert stored_user_data(api, server_id) == ud1_b64
    assert base64.b64decode(stored_user_data(api, server_id) or "") == gz

    # With a stock option: the stock PUT (2.100, name only) follows ours; both applied once.
    proxy.requests.clear()
    cli("server", "set", "--name", "vm1b", "--user-data", str(ud2), server_id)
    puts = [(r.microversion, json.loads(r.body), r.status) for r in sent(proxy, "PUT", put)]
    assert puts == [
        (PLUGIN_VERSION, {"server": {"user_data": ud2_b64}}, 200),
        (OSC_VERSION, {"server": {"name": "vm1b"}}, 200),
    ]
    assert stored_user_data(api, server_id) == ud2_b64
    r = api.get(put)
    assert r.json()["server"]["name"] == "vm1b"

    # --no-user-data removes it.
    proxy.requests.clear()
    cli("server", "set", "--no-user-data", "vm1b")
    [exchange] = sent(proxy, "PUT", put)
    assert json.loads(exchange.body) == {"server": {"user_data": None}}
    assert stored_user_data(api, server_id) is None

    # A file that cannot be read: refused before any request to the server.
    proxy.requests.clear()
    missing = cli("server", "set", "--user-data", str(tmp_path / "nope.txt"), "vm1b", ok=False)
    assert f"Can't open '{tmp_path / 'nope.txt'}'" in missing.stderr
    no_traceback(missing)
    assert [r for r in proxy.requests if r.path.startswith("/v2.1/servers")] == []


@sqlite_only
def test_config_drive_server_takes_user_data_with_a_hard_reboot(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy, tmp_path: Path
) -> None:
    server_id = active_server(api, cloud, "cd1", b"#cloud-config\n{}\n", config_drive=True)
    action = f"/v2.1/servers/{server_id}/action"
    old = stored_user_data(api, server_id)
    ud, ud_b64 = user_data_file(tmp_path, "ud.txt", b"#!/bin/sh\necho new\n")

    # server set: the API's 409 message, and the command that works instead.
    refused = cli("server", "set", "--user-data", str(ud), "cd1", ok=False)
    assert f"Instance {server_id} has a config drive" in refused.stderr
    assert f"openstack server reboot --hard --user-data {ud} cd1" in refused.stderr
    no_traceback(refused)
    [exchange] = sent(proxy, "PUT", f"/v2.1/servers/{server_id}")
    assert (exchange.status, exchange.microversion) == (409, PLUGIN_VERSION)
    assert stored_user_data(api, server_id) == old

    # The hint, followed: exactly one reboot request, HARD, with the user data, at 2.105.
    cli("server", "reboot", "--hard", "--user-data", str(ud), "--wait", "cd1")
    [exchange] = sent(proxy, "POST", action)
    assert (exchange.status, exchange.microversion) == (202, PLUGIN_VERSION)
    assert json.loads(exchange.body) == {"reboot": {"type": "HARD", "user_data": ud_b64}}
    # --wait polled the server after the reboot, and returned once it saw it ACTIVE again.
    calls = [r for r in proxy.requests if r.path.startswith(f"/v2.1/servers/{server_id}")]
    polls = calls[calls.index(exchange) + 1 :]
    assert polls and {r.method for r in polls} == {"GET"}
    assert json.loads(polls[-1].response)["server"]["status"] == "ACTIVE"
    server = api.get(f"/v2.1/servers/{server_id}").json()["server"]
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert server["OS-EXT-STS:power_state"] == 1
    assert stored_user_data(api, server_id) == ud_b64

    # --no-user-data on a hard reboot removes it, again in one request.
    proxy.requests.clear()
    cli("server", "reboot", "--hard", "--no-user-data", "cd1")
    [exchange] = sent(proxy, "POST", action)
    assert json.loads(exchange.body) == {"reboot": {"type": "HARD", "user_data": None}}
    wait_for(api, server_id, "ACTIVE")
    assert stored_user_data(api, server_id) is None

    # A plain hard reboot is still the stock one (OSC's microversion, no user_data).
    proxy.requests.clear()
    cli("server", "reboot", "--hard", "cd1")
    [exchange] = sent(proxy, "POST", action)
    assert (exchange.microversion, json.loads(exchange.body)) == (
        OSC_VERSION,
        {"reboot": {"type": "HARD"}},
    )
    wait_for(api, server_id, "ACTIVE")


@sqlite_only
def test_soft_reboot_with_user_data_is_refused_before_any_request(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy, tmp_path: Path
) -> None:
    server_id = active_server(api, cloud, "vm2", b"#cloud-config\n{}\n")
    old = stored_user_data(api, server_id)
    ud, _ = user_data_file(tmp_path, "ud.txt", b"#!/bin/sh\n")
    for soft in ([], ["--soft"]):  # a soft reboot is the default
        refused = cli("server", "reboot", *soft, "--user-data", str(ud), "vm2", ok=False)
        assert "--user-data needs --hard" in refused.stderr
        no_traceback(refused)
    assert [r for r in proxy.requests if r.path.startswith("/v2.1/servers")] == []
    assert stored_user_data(api, server_id) == old


@sqlite_only
def test_rebuild_user_data_needs_2_57(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy, tmp_path: Path
) -> None:
    server_id = active_server(api, cloud, "vm3", b"#cloud-config\n{}\n")
    action = f"/v2.1/servers/{server_id}/action"
    ud, ud_b64 = user_data_file(tmp_path, "ud.txt", b"#!/bin/sh\necho rebuilt\n")

    # At 2.55 the stock client would send user_data (it checks 2.54); the plugin refuses.
    for option in (["--user-data", str(ud)], ["--no-user-data"]):
        refused = cli(
            "--os-compute-api-version", "2.55", "server", "rebuild", *option, "vm3", ok=False
        )
        assert (
            f"--os-compute-api-version 2.57 or greater is required to support the "
            f"{option[0]} option"
        ) in refused.stderr
        no_traceback(refused)
    assert sent(proxy, "POST", action) == []

    # At 2.57 and at the default (2.100) the stock rebuild runs as it is.
    cli("--os-compute-api-version", "2.57", "server", "rebuild", "--user-data", str(ud), "vm3")
    [exchange] = sent(proxy, "POST", action)
    assert (exchange.status, exchange.microversion) == (202, "2.57")
    assert json.loads(exchange.body)["rebuild"]["user_data"] == ud_b64
    wait_for(api, server_id, "ACTIVE")
    assert stored_user_data(api, server_id) == ud_b64
    cli("server", "rebuild", "--no-user-data", "vm3")
    assert sent(proxy, "POST", action)[-1].microversion == OSC_VERSION
    wait_for(api, server_id, "ACTIVE")
    assert stored_user_data(api, server_id) is None


@pytest.mark.parametrize(
    ("advertised", "accepted"),
    [
        ("2.96", "2.96"),  # the version document says so: refused before any server request
        ("2.105", "2.104"),  # it claims 2.105 but answers 406 (say, mid-upgrade)
    ],
)
def test_cloud_without_2_105(
    openstack: Path, identity: osc.IdentityStub, tmp_path: Path, advertised: str, accepted: str
) -> None:
    ud, _ = user_data_file(tmp_path, "ud.txt", b"#!/bin/sh\n")
    server = osc_plugin.SERVER_ID
    with osc_plugin.older_compute(advertised=advertised, accepted=accepted) as compute:
        config = tmp_path / "osc"
        config.mkdir()
        cli = Cli(
            openstack, osc.cloud_env(config, f"{compute.url}/v2.1", TOKEN, identity.url), tmp_path
        )
        for command in (
            ["server", "set", "--user-data", str(ud), server],
            ["server", "set", "--no-user-data", server],
            ["server", "reboot", "--hard", "--user-data", str(ud), server],
        ):
            refused = cli(*command, ok=False)
            assert UNSUPPORTED in refused.stderr, refused.stderr
            no_traceback(refused)
        if advertised == accepted:
            assert f"this cloud's newest is {advertised}" in refused.stderr
            assert not any("/servers" in path for _, path, _ in compute.requests)
        else:
            assert f"maximum is {accepted}" in refused.stderr
            # Each command tried once, at 2.105, and got 406: no stock request followed.
            assert [(m, v) for m, _, v in compute.changes()] == [
                ("PUT", PLUGIN_VERSION),
                ("PUT", PLUGIN_VERSION),
                ("POST", PLUGIN_VERSION),
            ]


# --- live keys (microversion 2.106) ---------------------------------------------------------------

KEYS_VERSION = "2.106"
LATER = "2031-01-02T03:04:05Z"


def server_keys(api: httpx.Client, server_id: str) -> dict[str, Any]:
    """The server view at 2.106, as its owner sees it."""
    r = api.get(f"/v2.1/servers/{server_id}", headers=mv(KEYS_VERSION))
    assert r.status_code == 200, r.text
    server: dict[str, Any] = r.json()["server"]
    return server


def own_expiries(server: dict[str, Any]) -> dict[str, str | None]:
    return {k["name"]: k["expires_at"] for k in server["keys"] if k["source"] == "server"}


def add_key_pair(api: httpx.Client, name: str) -> None:
    key = keys.ed25519_public(name)
    r = api.post("/v2.1/os-keypairs", json={"keypair": {"name": name, "public_key": key}})
    assert r.status_code == 200, r.text


@sqlite_only
def test_help_shows_the_key_options_and_commands(cli: Cli) -> None:
    def words(text: str) -> str:  # argparse wraps help text
        return " ".join(text.split())

    create = words(cli("help", "server", "create").stdout)
    assert "--key-name <key-name> Keypair to inject into this server. Repeat the option" in create
    assert "--key-expires <name>=<timestamp>" in create
    rebuild = words(cli("help", "server", "rebuild").stdout)
    assert "2.54 or above). Repeat the option for several keys" in rebuild
    assert "--no-key-name" in rebuild  # the stock option next to it is still there
    commands = cli("help").stdout
    for name in ("server key add", "server key list", "server key remove", "server key set"):
        assert name in commands
    key_set = cli("help", "server", "key", "set").stdout
    assert "--key <key-name>" in key_set


@sqlite_only
def test_create_with_two_key_names(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy
) -> None:
    created = cli.json(
        "server",
        "create",
        "--image",
        cloud.image_id,
        "--flavor",
        "1",
        "--key-name",
        "key1",
        "--key-name",
        "key2",
        "--key-expires",
        f"key2={LATER}",
        "--wait",
        "vm-keys",
    )
    [exchange] = sent(proxy, "POST", "/v2.1/servers")
    assert (exchange.status, exchange.microversion) == (202, KEYS_VERSION)
    body = json.loads(exchange.body)["server"]
    assert "key_name" not in body
    assert body["key_names"] == ["key1", {"name": "key2", "expires_at": LATER}]
    assert body["networks"] == "auto"  # the rest of the stock request is unchanged
    assert created["status"] == "ACTIVE"
    server = server_keys(api, created["id"])
    assert server["key_names"] == ["key1", "key2"]
    assert own_expiries(server) == {"key1": None, "key2": LATER}

    # One --key-name is the stock request, at the stock microversion.
    proxy.requests.clear()
    one = cli.json(
        "server", "create", "--image", cloud.image_id, "--flavor", "1", "--key-name", "key2", "vm1k"
    )
    [exchange] = sent(proxy, "POST", "/v2.1/servers")
    assert exchange.microversion == OSC_VERSION
    assert json.loads(exchange.body)["server"]["key_name"] == "key2"
    wait_for(api, one["id"], "ACTIVE")
    assert server_keys(api, one["id"])["key_names"] == ["key2"]

    # --key-expires for a key no --key-name gives: refused before any request.
    proxy.requests.clear()
    refused = cli(
        "server",
        "create",
        "--image",
        cloud.image_id,
        "--flavor",
        "1",
        "--key-name",
        "key1",
        "--key-expires",
        f"key2={LATER}",
        "vm-bad",
        ok=False,
    )
    assert "--key-expires names key2, which no --key-name gives" in refused.stderr
    no_traceback(refused)
    assert sent(proxy, "POST", "/v2.1/servers") == []


@sqlite_only
def test_key_commands_on_a_running_server(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy
) -> None:
    add_key_pair(api, "key3")
    server_id = active_server(api, cloud, "vm-live", b"#cloud-config\n{}\n", key_name="key1")
    put = f"/v2.1/servers/{server_id}"

    # list: the key, its fingerprint, where it comes from and its delivery state.
    [listed] = cli.json("server", "key", "list", "vm-live")
    fingerprint = server_keys(api, server_id)["keys"][0]["fingerprint"]
    assert (listed["Name"], listed["Fingerprint"], listed["Source"]) == (
        "key1",
        fingerprint,
        "server",
    )
    assert (listed["Expires At"], listed["Expired"]) == (None, False)
    assert listed["Delivery"].split(" ")[0] in ("pending", "applied")
    assert sent(proxy, "PUT", put) == []

    # add, with an expiry: one PUT at 2.106 with the whole list, the old key kept.
    rows = cli.json("server", "key", "add", "--expires-at", LATER, "vm-live", "key2")
    [exchange] = sent(proxy, "PUT", put)
    assert (exchange.status, exchange.microversion) == (200, KEYS_VERSION)
    assert json.loads(exchange.body) == {
        "server": {"key_names": ["key1", {"name": "key2", "expires_at": LATER}]}
    }
    assert [(r["Name"], r["Expires At"]) for r in rows] == [("key1", None), ("key2", LATER)]
    server = server_keys(api, server_id)
    assert (server["status"], server["key_names"]) == ("ACTIVE", ["key1", "key2"])

    # add again: a third key; key2's expiry survives the read-modify-write.
    cli("server", "key", "add", "vm-live", "key3")
    server = server_keys(api, server_id)
    assert server["key_names"] == ["key1", "key2", "key3"]
    assert own_expiries(server) == {"key1": None, "key2": LATER, "key3": None}
    refused = cli("server", "key", "add", "vm-live", "key3", ok=False)
    assert "already has key key3" in refused.stderr

    # remove the first.
    cli("server", "key", "remove", "vm-live", "key1")
    server = server_keys(api, server_id)
    assert server["key_names"] == ["key2", "key3"]
    assert own_expiries(server)["key2"] == LATER
    refused = cli("server", "key", "remove", "vm-live", "key1", ok=False)
    assert "has no key key1 of its own" in refused.stderr
    no_traceback(refused)

    # set: replace the whole list, in the order given.
    proxy.requests.clear()
    cli("server", "key", "set", "--key", "key3", "--key", "key1", "vm-live")
    [exchange] = sent(proxy, "PUT", put)
    assert json.loads(exchange.body) == {"server": {"key_names": ["key3", "key1"]}}
    assert server_keys(api, server_id)["key_names"] == ["key3", "key1"]
    cli("server", "key", "set", "--no-key", "vm-live")
    assert server_keys(api, server_id)["key_names"] == []

    # The API's refusal comes through as its message: an unknown key pair.
    refused = cli("server", "key", "add", "vm-live", "nope", ok=False)
    assert "Invalid key_name provided." in refused.stderr
    no_traceback(refused)
    # The server ran all along: no reboot, no rebuild.
    server = server_keys(api, server_id)
    assert (server["status"], server["OS-EXT-STS:task_state"]) == ("ACTIVE", None)
    assert [r for r in proxy.requests if r.path == f"{put}/action"] == []


@sqlite_only
def test_rebuild_with_several_key_names(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy
) -> None:
    server_id = active_server(api, cloud, "vm-rb", b"#cloud-config\n{}\n", key_name="key1")
    action = f"/v2.1/servers/{server_id}/action"
    cli(
        "server",
        "rebuild",
        "--image",
        cloud.image2_id,
        "--key-name",
        "key2",
        "--key-name",
        "key1",
        "--wait",
        "vm-rb",
    )
    [exchange] = sent(proxy, "POST", action)
    assert (exchange.status, exchange.microversion) == (202, KEYS_VERSION)
    body = json.loads(exchange.body)["rebuild"]
    assert (body["imageRef"], body["key_names"]) == (cloud.image2_id, ["key2", "key1"])
    assert "key_name" not in body
    server = wait_for(api, server_id, "ACTIVE", version=KEYS_VERSION)
    assert server["key_names"] == ["key2", "key1"]

    # One --key-name: the stock rebuild, at the stock microversion.
    proxy.requests.clear()
    cli("server", "rebuild", "--key-name", "key1", "vm-rb")
    [exchange] = sent(proxy, "POST", action)
    assert exchange.microversion == OSC_VERSION
    assert json.loads(exchange.body)["rebuild"]["key_name"] == "key1"
    server = wait_for(api, server_id, "ACTIVE", version=KEYS_VERSION)
    assert server["key_names"] == ["key1"]


@pytest.mark.parametrize("advertised", ["2.105", "2.106"])
def test_cloud_without_2_106(
    openstack: Path, identity: osc.IdentityStub, tmp_path: Path, advertised: str
) -> None:
    server = osc_plugin.SERVER_ID
    # 2.105: the version document says so; 2.106: it claims it, then answers 406.
    with osc_plugin.older_compute(advertised=advertised, accepted="2.105") as compute:
        config = tmp_path / "osc"
        config.mkdir()
        cli = Cli(
            openstack, osc.cloud_env(config, f"{compute.url}/v2.1", TOKEN, identity.url), tmp_path
        )
        commands = [
            ["server", "key", "list", server],
            ["server", "key", "add", server, "key1"],
            ["server", "key", "set", "--key", "key1", server],
        ]
        if advertised == "2.105":  # refused in before(), ahead of the stock image look-up
            create = ["server", "create", "--image", "x", "--flavor", "1"]
            commands.append([*create, "--key-name", "a", "--key-name", "b", "vm"])
        for command in commands:
            refused = cli(*command, ok=False)
            assert "this cloud does not support live keys" in refused.stderr, refused.stderr
            no_traceback(refused)
        if advertised == "2.105":
            assert "this cloud's newest is 2.105" in refused.stderr
            assert not any("/servers" in path for _, path, _ in compute.requests)
        else:
            assert "maximum is 2.105" in refused.stderr
            # list and add stopped at their 2.106 read; set (no read) at its PUT, answered 406.
            assert compute.changes() == [("PUT", f"/v2.1/servers/{server}", "2.106")]


@sqlite_only
def test_project_key_commands(
    cli: Cli,
    openstack: Path,
    identity: osc.IdentityStub,
    api: httpx.Client,
    cloud: Cloud,
    proxy: osc.RecordingProxy,
    tmp_path: Path,
) -> None:
    ops = {"keypair": {"name": "ops", "public_key": keys.ed25519_public("ops")}}
    assert api.post("/v2.1/os-keypairs", json=ops, headers=ADMIN).status_code == 200
    server_id = active_server(api, cloud, "vm-proj", b"#cloud-config\n{}\n", key_name="key1")
    config = tmp_path / "osc-admin"
    config.mkdir()
    admin = Cli(
        openstack,
        osc.cloud_env(config, f"{proxy.url}/v2.1", ADMIN["X-Auth-Token"], identity.url),
        tmp_path,
    )
    url = "/v2.1/os-project-keys/proj"

    assert admin.json("project", "key", "list", "proj") == []
    rows = admin.json(
        "project", "key", "set", "proj", "--key", "admin:ops", "--key-expires", f"admin:ops={LATER}"
    )
    [exchange] = sent(proxy, "PUT", url)
    assert (exchange.status, exchange.microversion) == (200, KEYS_VERSION)
    assert json.loads(exchange.body) == {
        "project_keys": [{"name": "ops", "user_id": "admin", "expires_at": LATER}]
    }
    assert [(r["Name"], r["User ID"], r["Expires At"]) for r in rows] == [("ops", "admin", LATER)]
    # The project's running server got it, after its own key; its owner lists both.
    server = server_keys(api, server_id)
    assert [(k["name"], k["source"]) for k in server["keys"]] == [
        ("key1", "server"),
        ("ops", "project"),
    ]
    listed = cli.json("server", "key", "list", "vm-proj")
    assert [(r["Name"], r["Source"]) for r in listed] == [("key1", "server"), ("ops", "project")]
    assert [r["Name"] for r in cli.json("project", "key", "list", "proj")] == ["ops"]

    # Not an administrator: the API's 403 message; nothing changed.
    refused = cli("project", "key", "set", "proj", "--no-key", ok=False)
    assert "cloudseed:os-project-keys:update" in refused.stderr
    no_traceback(refused)
    admin("project", "key", "set", "proj", "--no-key")
    assert api.get(url, headers=mv(KEYS_VERSION)).json() == {"project_keys": []}
    assert [k["name"] for k in server_keys(api, server_id)["keys"]] == ["key1"]


@sqlite_only
def test_key_remove_leaves_out_expired_keys(
    cli: Cli, api: httpx.Client, cloud: Cloud, proxy: osc.RecordingProxy
) -> None:
    server_id = active_server(api, cloud, "vm-exp", b"#cloud-config\n{}\n", key_name="key1")
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    r = api.put(
        f"/v2.1/servers/{server_id}",
        json={"server": {"key_names": ["key1", {"name": "key2", "expires_at": soon}]}},
        headers=mv(KEYS_VERSION),
    )
    assert r.status_code == 200, r.text
    wait_until(
        lambda: any(k["expired"] for k in server_keys(api, server_id)["keys"]),
        timeout=15,
        interval=0.2,
        max_interval=0.2,
        what="key2 expired",
    )
    # key2 expired: sent back with its past expires_at, the PUT would be a 400.
    rows = cli.json("server", "key", "remove", "vm-exp", "key1")
    [exchange] = sent(proxy, "PUT", f"/v2.1/servers/{server_id}")
    assert (exchange.status, json.loads(exchange.body)) == (200, {"server": {"key_names": []}})
    assert rows == []
    assert server_keys(api, server_id)["key_names"] == []
