"""Signed instance identity in ``cloudseed nova-metadata`` (docs/identity.md, docs/nova-dropin.md),
a real process on a Nova deployment's databases (tests/support/nova_without_nova.py) with
cloudseed's own database for the keys (``[cloudseed_metadata] connection``, ``db sync``):
EC2's document with its signatures and the identity token carry the Nova instance's facts and
verify with the keys the listener publishes (and the CLI prints); a guest cannot get another
instance's identity; without the option the paths are Nova's 404s; a database that does not
answer, or was never synced, stops the start with one line; rotation as in cloudseed's own
mode."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from cloudseed.nova_metadata import schema
from tests.support.nova_identity import (
    DOCUMENT,
    TOKEN_PATH,
    run,
    session_token,
    signing_conf,
    verify_signature,
    verify_token,
)
from tests.support.nova_without_nova import (
    IMAGE,
    PROJECT,
    NovaDeployment,
    command,
    nova_deployment,
    running_service,
    signed,
)
from tests.support.openssl import pkcs7_verified

pytestmark = pytest.mark.databases
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
BASE = "/latest/dynamic/instance-identity/"


@pytest.fixture()
def nova(backend: str, tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment(backend, tmp_path) as deployment:
        deployment.neutron.groups["sg-default"] = "default"
        yield deployment


@pytest.fixture()
def sqlite_nova(tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment("sqlite", tmp_path) as deployment:
        deployment.neutron.groups["sg-default"] = "default"
        yield deployment


def test_document_and_token_are_the_nova_instance_s_and_verify_with_the_published_keys(
    nova: NovaDeployment, backend: str
) -> None:
    vm = nova.add_instance("web1", user_data=b"#cloud-config\n")
    with nova.cell.connect() as c:
        created = c.scalar(
            select(schema.instances.c.created_at).where(schema.instances.c.uuid == vm.uuid)
        )
    assert created is not None
    with signing_conf(nova, backend) as (conf, _url), running_service(conf) as service:
        headers = signed(vm.uuid)
        assert service.get("/latest", headers).text == "dynamic/\nmeta-data/\nuser-data"
        assert service.get("/latest/dynamic/", headers).text == "instance-identity/"
        assert service.get(BASE, headers).text == "document\npkcs7\nrsa2048\nsignature"
        answer = service.get(DOCUMENT, headers)
        assert answer.status_code == 200 and answer.headers["etag"]
        document = answer.content
        fields = json.loads(document)
        ec2 = {
            leaf: service.get(f"/latest/meta-data/{leaf}", headers).text
            for leaf in ("instance-id", "ami-id", "local-ipv4", "instance-type")
        }
        assert fields == {
            "accountId": PROJECT,
            "architecture": "x86_64",
            "availabilityZone": "nova",
            "billingProducts": None,
            "devpayProductCodes": None,
            "marketplaceProductCodes": None,
            "imageId": ec2["ami-id"],
            "instanceId": ec2["instance-id"],
            "instanceType": ec2["instance-type"],
            "kernelId": None,
            "pendingTime": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "privateIp": vm.address,
            "ramdiskId": None,
            "region": "nova",
            "version": "2017-09-30",
        }
        assert ec2["instance-id"].startswith("i-") and ec2["ami-id"].startswith("ami-")
        # The older EC2 versions that have dynamic/, and not those before.
        assert service.get("/2009-04-04/dynamic/instance-identity/document", headers).content == (
            document
        )
        assert service.get(
            "/2008-09-01/dynamic/instance-identity/document", headers
        ).status_code == (404)
        assert "dynamic" not in service.get("/2008-09-01", headers).text

        # The base64 signature, with the certificates the listener publishes to anyone.
        pem = httpx.get(
            service.url + "/v2.1/instance-identity/certificates",
            headers={"Accept": "application/x-pem-file"},
        )
        assert pem.headers["content-type"] == "application/x-pem-file"
        assert pem.headers["cache-control"] == "public, max-age=10"
        signature = service.get(BASE + "signature", headers).text
        kid = verify_signature(pem.text, document, signature)
        listing = httpx.get(service.url + "/v2.1/instance-identity/certificates").json()
        assert [c["kid"] for c in listing["certificates"] if c["signing"]] == [kid]

        # The identity token, verified by discovery on the listener, then its JWKS.
        token = httpx.get(
            service.url + TOKEN_PATH,
            params={"audience": "vault"},
            headers={**headers, **session_token(service.url, headers)},
        )
        assert token.status_code == 200, token.text
        assert token.headers["content-type"] == "application/jwt"
        assert token.headers["cache-control"] == "no-store"
        claims = verify_token(service.url, token.text, "vault")
        assert claims["iss"] == service.url  # the listener's address: no identity_issuer set
        assert claims["sub"] == vm.uuid
        assert (claims["project_id"], claims["image_id"]) == (PROJECT, IMAGE)
        assert (claims["flavor"], claims["availability_zone"]) == ("m1.tiny", "nova")
        assert claims["host_keys"] == []
        assert claims["exp"] - claims["iat"] == 600

        # The CLI prints the same keys, for relying parties that cannot reach the listener.
        printed = run(conf, "identity", "certificates")
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout == pem.text
        jwks = json.loads(run(conf, "identity", "jwks").stdout)
        assert jwks == httpx.get(service.url + "/v2.1/instance-identity/jwks").json()


@needs_openssl
def test_pkcs7_verifies_with_openssl(sqlite_nova: NovaDeployment, tmp_path: Path) -> None:
    nova = sqlite_nova
    vm = nova.add_instance("vm")
    with signing_conf(nova, "sqlite") as (conf, _url), running_service(conf) as service:
        headers = signed(vm.uuid)
        document = service.get(DOCUMENT, headers).content
        forms = {name: service.get(BASE + name, headers).text for name in ("pkcs7", "rsa2048")}
    bundle = run(conf, "identity", "certificates").stdout
    (tmp_path / "certificates.pem").write_text(bundle)
    for name, body in forms.items():
        # docs/identity.md's command, as a relying party runs it.
        assert pkcs7_verified(tmp_path, name, body) == document, name


def test_a_guest_cannot_get_another_instance_s_identity(sqlite_nova: NovaDeployment) -> None:
    nova = sqlite_nova
    mine = nova.add_instance("mine")
    theirs = nova.add_instance("theirs", project="another-project")
    with signing_conf(nova, "sqlite") as (conf, _url), running_service(conf) as service:
        me = signed(mine.uuid)
        my_id = service.get("/latest/meta-data/instance-id", me).text
        assert json.loads(service.get(DOCUMENT, me).content)["instanceId"] == my_id
        # Another instance's id with my signature, with none, with the wrong secret: 403.
        for forged in (
            {**me, "X-Instance-ID": theirs.uuid},
            {**signed(theirs.uuid), "X-Instance-ID-Signature": "0" * 64},
            signed(theirs.uuid, secret="guessed"),
        ):
            assert service.get(DOCUMENT, forged).status_code == 403
            assert service.get(BASE + "signature", forged).status_code == 403
        # A correctly signed id with my project (the other instance is someone else's): 404.
        assert service.get(DOCUMENT, signed(theirs.uuid, project=PROJECT)).status_code == 404
        # My session token does not buy their token, nor theirs mine.
        my_token = session_token(service.url, me)
        their_headers = signed(theirs.uuid, project="another-project")
        stolen = httpx.get(
            service.url + TOKEN_PATH,
            params={"audience": "vault"},
            headers={**their_headers, **my_token},
        )
        assert stolen.status_code == 401  # not a token of theirs: as none at all
        # No identity token without a session token, nor through a relay inside the guest.
        bare = httpx.get(service.url + TOKEN_PATH, params={"audience": "vault"}, headers=me)
        assert bare.status_code == 401
        relayed = httpx.get(
            service.url + TOKEN_PATH,
            params={"audience": "vault"},
            headers={**me, **my_token, "X-Forwarded-For": "10.0.0.9, 10.0.0.5"},
        )
        assert relayed.status_code == 403
        assert service.get(TOKEN_PATH + "?audience=", {**me, **my_token}).status_code == 400


def test_direct_mode_identity_is_the_caller_s_own(sqlite_nova: NovaDeployment) -> None:
    nova = sqlite_nova
    one = nova.add_instance("one", address="127.0.0.41")
    two = nova.add_instance("two", address="127.0.0.42")
    with signing_conf(nova, "sqlite") as (_conf, url):
        direct = nova.conf(
            neutron={"service_metadata_proxy": False}, cloudseed_metadata={"connection": url}
        )
        with running_service(direct) as service:
            transport = httpx.HTTPTransport(local_address=one.address)
            with httpx.Client(base_url=service.url, transport=transport, timeout=30) as client:
                own_id = client.get("/latest/meta-data/instance-id").text
                spoofed = client.get(
                    DOCUMENT, headers={**signed(two.uuid), "X-Forwarded-For": two.address}
                )
                document = json.loads(spoofed.content)
                assert document["privateIp"] == one.address
                assert document["instanceId"] == own_id
                token = client.put("/latest/api/token", headers={"X-Forwarded-For": "1.2.3.4"})
                assert token.status_code == 403  # relayed: no session token, so no JWT


def test_without_the_option_the_paths_are_nova_s_404s(sqlite_nova: NovaDeployment) -> None:
    nova = sqlite_nova
    vm = nova.add_instance("vm")
    with running_service(nova.conf()) as service:
        headers = signed(vm.uuid)
        assert service.get("/latest", headers).text == "meta-data/"
        tokens = session_token(service.url, headers)
        for path in (
            "/latest/dynamic/",
            DOCUMENT,
            BASE + "signature",
            TOKEN_PATH + "?audience=vault",
            "/v2.1/instance-identity/jwks",
            "/.well-known/openid-configuration",
        ):
            assert service.get(path, {**headers, **tokens}).status_code == 404, path
        # Unsigned, the public-key paths are what any path is without the proxy's headers.
        assert service.get("/v2.1/instance-identity/jwks").status_code == 400
    out = run(nova.conf(), "identity", "jwks")
    assert out.returncode == 2
    assert "[cloudseed_metadata] connection is not set" in out.stderr


def _start(conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("--config-file", str(conf), "--listen", "127.0.0.1:0"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_start_fails_with_one_line_when_its_database_does_not_answer_or_is_not_synced(
    sqlite_nova: NovaDeployment, tmp_path: Path
) -> None:
    nova = sqlite_nova
    with socket_closed() as port:
        url = f"mysql+pymysql://cloudseed:Sup3rSecret@127.0.0.1:{port}/cloudseed"
        result = _start(nova.conf(cloudseed_metadata={"connection": url}))
    assert result.returncode == 2
    assert "Sup3rSecret" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert "cannot reach cloudseed's database ([cloudseed_metadata] connection)" in errors[0]
    assert f"mysql+pymysql://cloudseed:***@127.0.0.1:{port}/cloudseed" in errors[0]

    never_synced = f"sqlite:///{tmp_path}/not-synced.sqlite"
    conf = nova.conf(cloudseed_metadata={"connection": never_synced})
    result = _start(conf)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert "has no schema yet" in errors[0]
    assert f"run `cloudseed nova-metadata --config-file {conf} db sync`" in errors[0]

    own = nova.conf(cloudseed_metadata={"connection": nova.api_url})
    result = _start(own)
    assert result.returncode == 2
    assert "must be a database of its own" in result.stderr


def test_rotation_as_in_cloudseed_s_own_mode(sqlite_nova: NovaDeployment) -> None:
    nova = sqlite_nova
    vm = nova.add_instance("vm")
    # key_cache_seconds = 0: a rotated key signs at once (activation is twice the cache).
    with (
        signing_conf(nova, "sqlite", identity_key_cache_seconds=0) as (conf, _url),
        running_service(conf) as service,
    ):
        headers = signed(vm.uuid)
        first = run(conf, "identity", "list", "-f", "json")
        [old] = json.loads(first.stdout)
        assert old["state"] == "signing"
        token = httpx.get(
            service.url + TOKEN_PATH,
            params={"audience": "ci"},
            headers={**headers, **session_token(service.url, headers)},
        ).text
        rotated = run(conf, "identity", "rotate", "-f", "json")
        assert rotated.returncode == 0, rotated.stderr
        new = json.loads(rotated.stdout)
        assert new["retired"] == old["kid"]
        states = {
            k["kid"]: k["state"]
            for k in json.loads(run(conf, "identity", "list", "-f", "json").stdout)
        }
        assert states == {new["kid"]: "signing", old["kid"]: "published"}
        jwks = httpx.get(service.url + "/v2.1/instance-identity/jwks").json()
        assert [k["kid"] for k in jwks["keys"]] == [new["kid"], old["kid"]]
        # What the old key signed still verifies; what is signed now is the new key's.
        assert verify_token(service.url, token, "ci")["sub"] == vm.uuid
        pem = run(conf, "identity", "certificates").stdout
        document = service.get(DOCUMENT, headers).content
        signature = service.get(BASE + "signature", headers).text
        assert verify_signature(pem, document, signature) == new["kid"]


@contextmanager
def socket_closed() -> Iterator[int]:
    """A loopback port bound and not listening while the block runs: connections to it are
    refused, and nothing else takes it meanwhile."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield int(bound.getsockname()[1])
