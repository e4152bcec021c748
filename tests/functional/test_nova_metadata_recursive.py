"""cloudseed's recursive view (docs/change-notification.md) in ``cloudseed nova-metadata``, a
real process on a Nova deployment's databases: ``/openstack/<version>/?recursive=true`` is the
instance's Nova documents in one JSON document, tagged by the instance, and long-polled like
any of them."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.nova_without_nova import (
    NovaDeployment,
    Service,
    nova_deployment,
    running_service,
    signed,
)


@pytest.fixture()
def nova(tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment("sqlite", tmp_path) as deployment:
        deployment.neutron.groups["sg-default"] = "default"
        yield deployment


@pytest.fixture()
def service(nova: NovaDeployment) -> Iterator[Service]:
    with running_service(nova.conf()) as running:
        yield running


def test_the_recursive_view_is_the_instance_s_documents_in_one(
    nova: NovaDeployment, service: Service
) -> None:
    vm = nova.add_instance("vm", user_data=b"#!/bin/sh\n", metadata={"role": "db"})
    headers = signed(vm.uuid)
    answer = service.get("/openstack/latest/?recursive=true", headers)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    view = answer.json()
    meta = service.get("/openstack/latest/meta_data.json", headers).json()
    del meta["random_seed"]
    assert view == {
        "meta_data.json": meta,
        "user_data": base64.b64encode(b"#!/bin/sh\n").decode(),
        "vendor_data.json": service.get("/openstack/latest/vendor_data.json", headers).json(),
        "network_data.json": service.get("/openstack/latest/network_data.json", headers).json(),
    }
    # The same bytes and tag every time (no seed), and a tag of its own.
    again = service.get("/openstack/latest/version?recursive=true", headers)
    assert again.content == answer.content
    assert again.headers["etag"] == answer.headers["etag"]
    listing = service.get("/openstack/latest", headers)
    assert listing.headers["etag"] != answer.headers["etag"]
    assert "recursive" not in listing.text
    unchanged = httpx.get(
        service.url + "/openstack/latest/?recursive=true",
        headers={**headers, "If-None-Match": answer.headers["etag"]},
    )
    assert unchanged.status_code == 304
    # By version: what each version's listing has.
    old = service.get("/openstack/2012-08-10/?recursive=true", headers).json()
    assert set(old) == {"meta_data.json", "user_data"}
    assert "project_id" not in old["meta_data.json"]
    # Only on the version's listing.
    refused = service.get("/openstack/latest/meta_data.json?recursive=true", headers)
    assert refused.status_code == 400
    assert "recursive=true is only for /openstack/<version>/." in refused.text


def test_the_recursive_view_is_long_polled(nova: NovaDeployment, service: Service) -> None:
    vm = nova.add_instance("vm", metadata={"a": "1"})
    path = "/openstack/latest/?recursive=true"
    tag = service.get(path, signed(vm.uuid)).headers["etag"]
    started = time.monotonic()
    answered: list[httpx.Response] = []
    with httpx.Client(base_url=service.url, timeout=30) as client:
        waiting = threading.Thread(
            target=lambda: answered.append(
                client.get(
                    f"{path}&wait_for_change=true&last_etag={tag.strip(chr(34))}&timeout_sec=20",
                    headers=signed(vm.uuid),
                )
            )
        )
        waiting.start()
        nova.set_metadata(vm, "b", "2")
        waiting.join(timeout=25)
    assert answered and answered[0].status_code == 200
    assert answered[0].json()["meta_data.json"]["meta"] == {"a": "1", "b": "2"}
    assert answered[0].headers["etag"] != tag
    assert time.monotonic() - started < 10
