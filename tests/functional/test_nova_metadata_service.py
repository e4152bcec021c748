"""``cloudseed nova-metadata`` on a Nova deployment's databases (built without Nova:
tests/support/nova_without_nova.py), a real process on every backend: identification as
Nova's handler does it, both trees, EC2 ids made on first use, security groups from Neutron,
passwords, changes within a second, refusals."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from cloudseed.nova_metadata import schema
from tests.support.nova_without_nova import (
    PROJECT,
    NovaDeployment,
    Service,
    nova_deployment,
    running_service,
    signed,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.databases
KEY = ("mykey", "ssh", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIBSrXrc6m6lH54i3kRGkXEQxdQ3 me@host")


@pytest.fixture()
def nova(backend: str, tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment(backend, tmp_path) as deployment:
        yield deployment


@pytest.fixture()
def service(nova: NovaDeployment) -> Iterator[Service]:
    nova.neutron.groups.update({"sg-default": "default", "sg-web": "web"})
    with running_service(nova.conf()) as running:
        yield running


def test_a_signed_request_gets_the_instance_documents(
    nova: NovaDeployment, service: Service
) -> None:
    web = nova.add_instance(
        "web1",
        keys=[KEY],
        user_data=b"#cloud-config\n",
        metadata={"role": "web"},
        groups=("sg-default", "sg-web"),
    )
    meta = service.get("/openstack/latest/meta_data.json", signed(web.uuid))
    assert meta.status_code == 200
    assert meta.headers["content-type"] == "application/json"
    doc = meta.json()
    assert doc["uuid"] == web.uuid
    assert doc["meta"] == {"role": "web"}
    assert doc["public_keys"] == {"mykey": KEY[2]}
    assert doc["keys"] == [{"name": "mykey", "type": "ssh", "data": KEY[2]}]
    assert (doc["hostname"], doc["name"], doc["project_id"]) == ("web1.novalocal", "web1", PROJECT)
    assert doc["availability_zone"] == "nova"
    assert doc["devices"] == [] and doc["dedicated_cpus"] == []
    assert len(doc["random_seed"]) == 684
    assert service.get("/openstack/latest/user_data", signed(web.uuid)).content == (
        b"#cloud-config\n"
    )
    listing = service.get("/openstack/2013-04-04", signed(web.uuid)).text
    assert listing == "meta_data.json\nuser_data\npassword"
    network = service.get("/openstack/latest/network_data.json", signed(web.uuid)).json()
    assert network["links"][0]["ethernet_mac_address"].startswith("fa:16:3e")
    assert network["networks"][0]["type"] == "ipv4_dhcp"
    assert network["services"] == [{"type": "dns", "address": "10.0.0.2"}]

    ec2 = {
        p: service.get(f"/latest/meta-data/{p}", signed(web.uuid)).text
        for p in (
            "public-keys/",
            "public-keys/0/openssh-key",
            "local-ipv4",
            "hostname",
            "instance-type",
            "placement/availability-zone",
            "security-groups",
            "block-device-mapping/root",
            "ami-launch-index",
        )
    }
    assert ec2 == {
        "public-keys/": "0=mykey",
        "public-keys/0/openssh-key": KEY[2],
        "local-ipv4": web.address,
        "hostname": "web1.novalocal",
        "instance-type": "m1.tiny",
        "placement/availability-zone": "nova",
        "security-groups": "default\nweb",
        "block-device-mapping/root": "/dev/vda",
        "ami-launch-index": "0",
    }
    assert service.get("/latest", signed(web.uuid)).text == "meta-data/\nuser-data"
    assert service.get("/latest/user-data", signed(web.uuid)).content == b"#cloud-config\n"


def test_ec2_ids_are_nova_s_and_made_on_first_use(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm")
    with nova.cell.connect() as c:
        mapping = c.scalar(
            select(schema.instance_id_mappings.c.id).where(
                schema.instance_id_mappings.c.uuid == vm.uuid
            )
        )
        assert c.scalar(select(func.count()).select_from(schema.s3_images)) == 0
    assert service.get("/latest/meta-data/instance-id", signed(vm.uuid)).text == f"i-{mapping:08x}"
    ami = service.get("/latest/meta-data/ami-id", signed(vm.uuid)).text
    with nova.cell.connect() as c:
        images = c.execute(select(schema.s3_images.c.id, schema.s3_images.c.uuid)).all()
    assert len(images) == 1
    assert ami == f"ami-{images[0].id:08x}"
    # A second instance of the same image gets the same id; no second row.
    other = nova.add_instance("other")
    assert service.get("/latest/meta-data/ami-id", signed(other.uuid)).text == ami
    with nova.cell.connect() as c:
        assert c.scalar(select(func.count()).select_from(schema.s3_images)) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"X-Instance-ID": None}, "X-Instance-ID header is missing from request."),
        ({"X-Instance-ID-Signature": None}, "X-Instance-ID-Signature header is missing"),
        ({"X-Tenant-ID": None}, "X-Tenant-ID header is missing from request."),
    ],
)
def test_proxy_headers_missing_are_nova_s_400(
    nova: NovaDeployment, service: Service, change: dict[str, None], message: str
) -> None:
    vm = nova.add_instance("vm")
    headers = {k: v for k, v in signed(vm.uuid).items() if k not in change}
    answer = service.get("/openstack/latest/meta_data.json", headers)
    assert answer.status_code == 400
    assert message in answer.text


def test_refusals(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm")
    forged = {**signed(vm.uuid), "X-Instance-ID-Signature": "0" * 64}
    assert service.get("/openstack/latest/meta_data.json", forged).status_code == 403
    other_secret = signed(vm.uuid, secret="not-the-secret")
    assert service.get("/latest/meta-data/", other_secret).status_code == 403
    # Even for a path that names nothing: Nova identifies the caller first.
    assert service.get("/nowhere/at/all", forged).status_code == 403
    wrong_tenant = signed(vm.uuid, project="someone-else")
    assert service.get("/openstack/latest/meta_data.json", wrong_tenant).status_code == 404
    unknown = signed("9a9a9a9a-0000-4000-8000-000000000000")
    assert service.get("/openstack/latest/meta_data.json", unknown).status_code == 404
    twice = httpx.get(
        service.url + "/openstack/latest/meta_data.json",
        headers=[*signed(vm.uuid).items(), ("X-Instance-ID", vm.uuid)],
    )
    assert twice.status_code == 400
    assert "Multiple X-Instance-ID headers" in twice.text
    # "/" lists the EC2 versions without asking who calls, as Nova.
    assert service.get("/").text.endswith("2009-04-04\nlatest")
    for path in (
        "/latest/meta-data/nothing",
        "/openstack/1999-01-01/meta_data.json",
        "/openstack/content/0000",
        "/latest/meta-data/hostname/x",
    ):
        assert service.get(path, signed(vm.uuid)).status_code == 404, path
    assert (
        httpx.delete(service.url + "/latest/meta-data/", headers=signed(vm.uuid)).status_code == 405
    )


def test_deleted_and_unmapped_instances(nova: NovaDeployment, service: Service) -> None:
    gone = nova.add_instance("gone")
    nova.destroy(gone)
    assert service.get("/openstack/latest/meta_data.json", signed(gone.uuid)).status_code == 404
    # Without a mapping, Nova looks in [database] connection: so does the drop-in.
    loose = nova.add_instance("loose", mapped=False)
    answer = service.get("/openstack/latest/meta_data.json", signed(loose.uuid))
    assert answer.status_code == 200
    assert answer.json()["name"] == "loose"


def test_password_posted_once(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm")
    url = service.url + "/openstack/latest/password"
    assert httpx.get(url, headers=signed(vm.uuid)).content == b""
    assert httpx.post(url, headers=signed(vm.uuid), content=b"x" * 1021).status_code == 400
    posted = httpx.post(url, headers=signed(vm.uuid), content="s3cret-" + "é" * 300)
    assert posted.status_code == 200
    assert httpx.get(url, headers=signed(vm.uuid)).text == "s3cret-" + "é" * 300
    assert httpx.post(url, headers=signed(vm.uuid), content=b"again").status_code == 409
    table = schema.instance_system_metadata
    with nova.cell.connect() as c:
        found = c.execute(
            select(table.c.key, table.c.value).where(table.c.instance_uuid == vm.uuid)
        )
        rows = {key: value for key, value in found}
    assert sorted(rows) == ["password_0", "password_1", "password_2", "password_3"]
    assert [len(rows[f"password_{i}"]) for i in range(4)] == [255, 52, 0, 0]
    # Before 2013-04-04 there is no password file.
    old = httpx.post(service.url + "/openstack/2012-08-10/password", headers=signed(vm.uuid))
    assert old.status_code == 404


def test_changes_reach_guests_within_a_second(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm", metadata={"a": "1"})
    path = "/openstack/latest/meta_data.json"

    def meta() -> httpx.Response:
        return service.get(path, signed(vm.uuid))

    assert meta().json()["meta"] == {"a": "1"}  # cached from now on
    changes = [
        (
            "metadata item set",
            lambda: nova.set_metadata(vm, "b", "2"),
            lambda r: r.json()["meta"] == {"a": "1", "b": "2"},
        ),
        (
            "metadata item deleted",
            lambda: nova.delete_metadata(vm, "a"),
            lambda r: r.json()["meta"] == {"b": "2"},
        ),
        (
            "hostname changed (2.90)",
            lambda: nova.save(vm, hostname="renamed"),
            lambda r: r.json()["hostname"] == "renamed.novalocal",
        ),
        ("deleted", lambda: nova.destroy(vm), lambda r: r.status_code == 404),
    ]
    for what, change, seen in changes:
        change()
        started = time.monotonic()
        wait_until(partial(_seen, seen, meta), timeout=10, interval=0.02, what=what)
        assert time.monotonic() - started < 1.0, what


def _seen(seen: Callable[[httpx.Response], bool], meta: Callable[[], httpx.Response]) -> bool:
    return seen(meta())


def test_a_worker_answers_the_same_document_again_with_an_etag(
    nova: NovaDeployment, service: Service
) -> None:
    vm = nova.add_instance("vm")
    first = service.get("/latest/meta-data/hostname", signed(vm.uuid))
    tag = first.headers["etag"]
    again = service.get("/latest/meta-data/hostname", {**signed(vm.uuid), "If-None-Match": tag})
    assert again.status_code == 304
    nova.save(vm, hostname="other")
    wait_until(
        lambda: (
            service.get("/latest/meta-data/hostname", signed(vm.uuid)).text == "other.novalocal"
        ),
        what="the new hostname",
    )
    changed = service.get("/latest/meta-data/hostname", {**signed(vm.uuid), "If-None-Match": tag})
    assert changed.status_code == 200


def test_session_tokens(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm")
    headers = {k: v for k, v in signed(vm.uuid).items() if k != "X-Forwarded-For"}
    token = httpx.put(
        service.url + "/latest/api/token",
        headers={**headers, "X-aws-ec2-metadata-token-ttl-seconds": "60"},
    )
    assert token.status_code == 200
    with_token = {**headers, "X-aws-ec2-metadata-token": token.text}
    assert service.get("/latest/meta-data/hostname", with_token).text == "vm.novalocal"
    # Change the last hex digit to another one (appending a fixed "0" left the token
    # unchanged whenever it already ended in "0", one run in sixteen).
    flipped = "1" if token.text.endswith("0") else "0"
    bad = {**headers, "X-aws-ec2-metadata-token": token.text[:-1] + flipped}
    assert service.get("/latest/meta-data/hostname", bad).status_code == 401
    # A Nova metadata item makes tokens mandatory for one instance, as on cloudseed's servers.
    strict = nova.add_instance("strict", metadata={"metadata_http_tokens": "required"})
    assert service.get("/latest/meta-data/hostname", signed(strict.uuid)).status_code == 401
    assert service.get("/latest/meta-data/hostname", signed(vm.uuid)).status_code == 200


def test_neutron_away_is_a_503_for_what_needs_it(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm")
    nova.neutron.failing = True
    assert service.get("/latest/meta-data/security-groups", signed(vm.uuid)).status_code == 503
    # What does not need Neutron is served (Nova would answer 500 for every document).
    assert service.get("/openstack/latest/meta_data.json", signed(vm.uuid)).status_code == 200
    nova.neutron.failing = False
    assert service.get("/latest/meta-data/security-groups", signed(vm.uuid)).text == "default"


def test_documents_are_json_equal_across_versions(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm", keys=[KEY])
    older = service.get("/openstack/2012-08-10/meta_data.json", signed(vm.uuid)).json()
    assert "random_seed" not in older and "project_id" not in older
    liberty = service.get("/openstack/2015-10-15/meta_data.json", signed(vm.uuid)).json()
    assert liberty["project_id"] == PROJECT and "devices" not in liberty
    # network_data.json at every version, as Nova serves it (listed from 2015-10-15 only).
    assert (
        service.get("/openstack/2012-08-10/network_data.json", signed(vm.uuid)).status_code == 200
    )
    assert json.loads(service.get("/openstack/latest/vendor_data2.json", signed(vm.uuid)).text) == {
        "static": {}
    }


def test_a_long_poll_answers_when_nova_changes_the_instance(
    nova: NovaDeployment, service: Service
) -> None:
    vm = nova.add_instance("vm", metadata={"a": "1"})
    path = "/openstack/latest/meta_data.json"
    tag = service.get(path, signed(vm.uuid)).headers["etag"]
    started = time.monotonic()
    with httpx.Client(base_url=service.url, timeout=30) as client:
        answered: list[httpx.Response] = []
        waiting = threading.Thread(
            target=lambda: answered.append(
                client.get(
                    f"{path}?wait_for_change=true&last_etag={tag.strip(chr(34))}&timeout_sec=20",
                    headers=signed(vm.uuid),
                )
            )
        )
        waiting.start()
        nova.set_metadata(vm, "b", "2")
        waiting.join(timeout=25)
    assert answered and answered[0].status_code == 200
    assert answered[0].json()["meta"] == {"a": "1", "b": "2"}
    assert answered[0].headers["etag"] != tag
    assert time.monotonic() - started < 10
