"""The real ``openstack`` command (python-openstackclient, in its own venv) against cloudseed.

OSC reaches the compute API through a clouds.yaml (see ``tests/support/osc.py``):
``auth_type: admin_token`` with the noauth2 token ``alice:proj``, ``compute_endpoint_override``
at cloudseed's ``/v2.1`` and ``identity_endpoint_override`` at a stub that serves only
Keystone's v3 version document (OSC's keypair commands insist on identity v3 being there).

Between OSC and cloudseed sits a transparent recording proxy, so the test can see what OSC
really sent: the microversion headers, and the pages it fetched by following
``keypairs_links``. The proxy passes the Host header through, so cloudseed's links point at it.

This runs once, on SQLite: the API's behaviour on each backend is covered by tests/functional,
and each ``openstack`` run costs 1.5-3 s of client start-up.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support import osc
from tests.support.osc_cli import TOKEN, Cli

pytestmark = [
    pytest.mark.compat,
    # Only SQLite: overrides the session-wide backend parametrisation for this module, so the
    # PostgreSQL and MariaDB variants are not even collected (rather than collected and skipped).
    pytest.mark.parametrize("backend", ["sqlite"], indirect=True),
]


def make_public_key(directory: Path) -> tuple[Path, str]:
    """An ed25519 public key file, and its MD5 fingerprint as ``ssh-keygen -l -E md5`` says."""
    private = directory / "id_ed25519"
    public = directory / "id_ed25519.pub"
    keygen = shutil.which("ssh-keygen")
    if keygen:
        subprocess.run(
            [
                keygen,
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "alice@cloudseed-test",
                "-f",
                str(private),
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        out = subprocess.run(
            [keygen, "-l", "-E", "md5", "-f", str(public)],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        # "256 MD5:1f:2e:... alice@cloudseed-test (ED25519)"
        fingerprint = out.split()[1].removeprefix("MD5:")
        return public, fingerprint
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    line = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    public.write_text(f"{line} alice@cloudseed-test\n")
    return public, md5_fingerprint(line)


def md5_fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def public_key_of(private_pem: str) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(private_pem.encode(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def test_keypair_commands(
    cli: Cli,
    api: httpx.Client,
    proxy: osc.RecordingProxy,
    identity: osc.IdentityStub,
    tmp_path: Path,
) -> None:
    pub_file, fingerprint = make_public_key(tmp_path)
    pub_text = pub_file.read_text()
    assert pub_text.endswith("\n")

    # --- import a public key ------------------------------------------------------------------
    created = cli.json("keypair", "create", "--public-key", str(pub_file), "k1")
    assert created["name"] == "k1"
    assert created["fingerprint"] == fingerprint

    stored = api.get("/v2.1/os-keypairs/k1")
    assert stored.status_code == 200, stored.text
    keypair = stored.json()["keypair"]
    assert keypair["public_key"].encode() == pub_text.encode()  # byte for byte, incl. "\n"
    assert keypair["fingerprint"] == fingerprint
    assert keypair["user_id"] == "alice"
    create_request = proxy.last("POST", "/v2.1/os-keypairs")
    assert json.loads(create_request.body) == {"keypair": {"name": "k1", "public_key": pub_text}}

    # --- list and show ------------------------------------------------------------------------
    listed = cli.json("keypair", "list")
    assert {"Name": "k1", "Fingerprint": fingerprint, "Type": "ssh"} in listed

    shown = cli.json("keypair", "show", "k1")
    assert shown["name"] == "k1"
    assert shown["fingerprint"] == fingerprint
    assert shown["type"] == "ssh"
    assert shown["user_id"] == "alice"

    # --public-key prints the stored key as is: the file's content, with its newline.
    assert cli("keypair", "show", "--public-key", "k1").stdout.rstrip("\n") == pub_text.rstrip("\n")

    # --- OSC generates k2's key locally and imports the public half ---------------------------
    generated = cli("keypair", "create", "k2").stdout
    assert generated.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    k2 = api.get("/v2.1/os-keypairs/k2").json()["keypair"]
    assert k2["public_key"].split()[:2] == public_key_of(generated).split()[:2]
    assert k2["fingerprint"] == md5_fingerprint(k2["public_key"])
    sent = json.loads(proxy.last("POST", "/v2.1/os-keypairs").body)["keypair"]
    assert set(sent) == {"name", "public_key"} and sent["name"] == "k2"
    assert {k["Name"] for k in cli.json("keypair", "list")} == {"k1", "k2"}

    # --- a duplicate name: Nova's 409 message reaches the user --------------------------------
    duplicate = cli("keypair", "create", "--public-key", str(pub_file), "k1", ok=False)
    assert "Key pair 'k1' already exists." in duplicate.stdout + duplicate.stderr
    assert proxy.last("POST", "/v2.1/os-keypairs").status == 409

    # --- paging: --limit is the page size; OSC follows keypairs_links to the end --------------
    before = len(proxy.requests)
    paged = cli.json("--os-compute-api-version", "2.35", "keypair", "list", "--limit", "1")
    assert [k["Name"] for k in paged] == ["k1", "k2"]
    pages = [
        r
        for r in proxy.requests[before:]
        if r.method == "GET" and r.path.startswith("/v2.1/os-keypairs")
    ]
    assert [r.path for r in pages] == [
        "/v2.1/os-keypairs?limit=1",
        "/v2.1/os-keypairs?limit=1&marker=k1",
        "/v2.1/os-keypairs?limit=1&marker=k2",
    ]
    assert all(r.microversion == "2.35" for r in pages)
    first_page = api.get(
        "/v2.1/os-keypairs", params={"limit": 1}, headers={"OpenStack-API-Version": "compute 2.35"}
    ).json()
    assert [k["keypair"]["name"] for k in first_page["keypairs"]] == ["k1"]
    assert first_page["keypairs_links"] == [
        {"rel": "next", "href": f"{api.base_url}/v2.1/os-keypairs?limit=1&marker=k1"}
    ]

    # --- delete; then show and delete fail ----------------------------------------------------
    cli("keypair", "delete", "k1")
    assert api.get("/v2.1/os-keypairs/k1").status_code == 404
    missing = cli("keypair", "show", "k1", ok=False)
    # OSC's show is a find: the 404 of GET /os-keypairs/k1 makes it search the list, and it
    # prints its own message, not the API's.
    assert "No Keypair found for k1" in missing.stderr
    not_found = proxy.last("GET", "/v2.1/os-keypairs/k1")
    assert not_found.status == 404
    assert json.loads(not_found.response) == {
        "itemNotFound": {"code": 404, "message": "Keypair k1 not found for user alice"}
    }
    # delete passes the API's 404 message through to the user.
    again = cli("keypair", "delete", "k1", ok=False)
    assert "Keypair k1 not found for user alice" in again.stdout + again.stderr
    assert proxy.last("DELETE", "/v2.1/os-keypairs/k1").status == 404

    # --- what went over the wire --------------------------------------------------------------
    api_calls = [r for r in proxy.requests if r.path.startswith("/v2.1/os-keypairs")]
    assert all(r.headers.get("x-auth-token") == TOKEN for r in api_calls)
    # Keypair calls use the SDK's Keypair maximum, 2.10, unless the version is forced; both
    # microversion headers are always sent together.
    assert {r.microversion for r in api_calls} == {"2.10", "2.35"}
    assert all(r.headers.get("x-openstack-nova-api-version") == r.microversion for r in api_calls)
    # Discovery of the compute endpoint is the only other traffic.
    assert {r.path for r in proxy.requests if r not in api_calls} <= {"/v2.1", "/v2.1/"}
    # The identity stub answered version discovery and nothing else: no token was requested.
    assert identity.requests, "OSC did not consult the identity endpoint at all"
    assert identity.token_requests() == []
    assert {(r[0], r[1]) for r in identity.requests} <= {
        ("GET", "/v3"),
        ("GET", "/v3/"),
        ("GET", "/"),
    }

    assert len(cli.runs) < 15
