"""The drop-in's replayed answers (replay.py, nova_metadata/replays.py): a request made again
with the very same head through Neutron's proxy is answered from the bytes of the last
answer, skipping the parser and the app; never for another instance, never after Nova
changed the instance or the StaticJSON file, and never for what is different at every
answer (meta_data.json's seed) or drawn from elsewhere (security groups).

The drop-in runs in this process (``running_nova_metadata_app``) so the test can see what
the app was asked; the Nova databases are built without Nova (SQLite: the change feed is
the same on every backend, tests/functional/test_nova_metadata_watch.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cloudseed.nova_metadata import config as nova_config
from cloudseed.nova_metadata.app import NovaMetadataApp
from tests.support.nova_without_nova import Instance, NovaDeployment, nova_deployment, signed
from tests.support.raw_http import (
    Connection,
    alike_but_the_seed,
    asked_at_once,
    head,
    without_date,
)
from tests.support.server import running_nova_metadata_app
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.databases, pytest.mark.parametrize("backend", ["sqlite"], indirect=True)]

PROXY = "127.0.0.1"  # Neutron's metadata proxy: one peer for every instance
USER_DATA = "/openstack/latest/user_data"
REPLAYED = (
    "/openstack",
    USER_DATA,
    "/openstack/latest/network_data.json",
    "/openstack/latest/vendor_data.json",
    "/openstack/latest/vendor_data2.json",
    "/latest/meta-data/",
    "/latest/meta-data/hostname",
    "/latest/user-data",
)


@pytest.fixture()
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the app was asked to answer at once (a replay does not ask it)."""
    return asked_at_once(monkeypatch, NovaMetadataApp)


@pytest.fixture()
def nova(backend: str, tmp_path: Path) -> Iterator[NovaDeployment]:
    with nova_deployment(backend, tmp_path) as deployment:
        deployment.neutron.groups.update({"sg-default": "default"})
        yield deployment


@pytest.fixture()
def vendor_file(tmp_path: Path) -> Path:
    path = tmp_path / "vendor.json"
    path.write_text(json.dumps({"v": 1}))
    return path


@contextmanager
def dropin(
    nova: NovaDeployment, vendor_file: Path, *instances: Instance
) -> Iterator[tuple[str, NovaMetadataApp]]:
    """The drop-in on ``nova``, started with ``instances`` last written by Nova 30 s before:
    older than what its watch reports at its first poll (``changes.HISTORY``), which would
    otherwise drop, at a time of its own, what the test has seen kept."""
    for instance in instances:
        nova.backdate(instance, 30)
    conf = nova.conf(
        api={"vendordata_providers": "StaticJSON", "vendordata_jsonfile_path": vendor_file}
    )
    with running_nova_metadata_app(nova_config.load([str(conf)])) as running:
        yield running


def via_proxy(path: str, instance: str) -> bytes:
    return head(path, *(f"{name}: {value}" for name, value in signed(instance).items()))


def kept(app: NovaMetadataApp, count: int) -> None:
    """Wait until ``app`` keeps ``count`` entries (one is kept just after its answer is
    written: the client may read it first)."""
    wait_until(lambda: len(app.replays) == count, what=f"{count} entries kept")


def test_an_instances_documents_are_replayed_until_nova_changes_it(
    nova: NovaDeployment, vendor_file: Path, asked: list[str]
) -> None:
    web = nova.add_instance("web", user_data=b"#cloud-config\n")
    with dropin(nova, vendor_file, web) as (url, app), Connection(url, PROXY) as conn:
        first = {path: conn.ask(via_proxy(path, web.uuid)) for path in REPLAYED}
        assert all(answer[0] == 200 for answer in first.values()), first
        assert first[USER_DATA][2] == b"#cloud-config\n"
        for path in REPLAYED:  # answered at once now: kept
            assert without_date(conn.ask(via_proxy(path, web.uuid))) == without_date(first[path])
        kept(app, len(REPLAYED))
        asked.clear()
        for path in REPLAYED:
            assert without_date(conn.ask(via_proxy(path, web.uuid))) == without_date(first[path])
        assert asked == []  # none reached the app
        # meta_data.json: replayed, with a new random seed each time.
        meta = "/openstack/latest/meta_data.json"
        answers = [conn.ask(via_proxy(meta, web.uuid)) for _ in range(5)]
        assert asked.count(meta) == 1
        assert {a[0] for a in answers} == {200}
        assert {a[1]["etag"] for a in answers} == {answers[0][1]["etag"]}
        alike_but_the_seed([a[2] for a in answers])
        # Never replayed: the security groups (from Neutron, for a while), the password (the
        # guest sets it).
        for path in ("/latest/meta-data/security-groups", "/openstack/latest/password"):
            answers = [conn.ask(via_proxy(path, web.uuid)) for _ in range(3)]
            assert [a[0] for a in answers] == [200] * 3, (path, answers)
            assert asked.count(path) == 3, path
        # Nova changes the instance (its user data, as a rebuild writes it): the entries go
        # within the change feed's poll, and the same head gets the new bytes.
        nova.save(web, user_data=base64.b64encode(b"#cloud-config\nrebuilt: true\n").decode())
        wait_until(
            lambda: conn.ask(via_proxy(USER_DATA, web.uuid))[2].endswith(b"rebuilt: true\n"),
            what="the new user data",
        )
        assert len(app.replays) <= 1  # the user data's own entry, kept again at most


def test_an_entry_answers_no_other_instance_and_not_after_a_delete(
    nova: NovaDeployment, vendor_file: Path, asked: list[str]
) -> None:
    a = nova.add_instance("a", user_data=b"for a")
    b = nova.add_instance("b", user_data=b"for b")
    with dropin(nova, vendor_file, a, b) as (url, app), Connection(url, PROXY) as conn:
        for _ in range(3):
            assert conn.ask(via_proxy(USER_DATA, a.uuid))[2] == b"for a"
        kept(app, 1)
        for _ in range(2):
            assert conn.ask(via_proxy(USER_DATA, b.uuid))[2] == b"for b"
        # A's id with B's signature: refused every time, A's entry notwithstanding.
        forged = dict(
            signed(a.uuid), **{"X-Instance-ID-Signature": signed(b.uuid)["X-Instance-ID-Signature"]}
        )
        raw = head(USER_DATA, *(f"{k}: {v}" for k, v in forged.items()))
        assert [conn.ask(raw)[0] for _ in range(2)] == [403, 403]
        # A's own head from another peer (the proxy's address is part of the key): asked.
        asked.clear()
        with Connection(url, "127.0.0.2") as elsewhere:
            assert elsewhere.ask(via_proxy(USER_DATA, a.uuid))[2] == b"for a"
        assert asked == [USER_DATA]
        # Nova deletes A: its kept answer is not given again.
        nova.destroy(a)
        wait_until(
            lambda: conn.ask(via_proxy(USER_DATA, a.uuid))[0] == 404, what="A's answer a 404"
        )
        assert conn.ask(via_proxy(USER_DATA, a.uuid))[0] == 404
        assert conn.ask(via_proxy(USER_DATA, b.uuid))[2] == b"for b"


def test_an_edited_vendordata_file_is_not_replayed(
    nova: NovaDeployment,
    vendor_file: Path,
    asked: list[str],
) -> None:
    vm = nova.add_instance("vm")
    paths = ("/openstack/latest/vendor_data.json", "/openstack/latest/vendor_data2.json")
    with dropin(nova, vendor_file, vm) as (url, app), Connection(url, PROXY) as conn:
        for _ in range(3):
            assert json.loads(conn.ask(via_proxy(paths[0], vm.uuid))[2]) == {"v": 1}
            assert json.loads(conn.ask(via_proxy(paths[1], vm.uuid))[2]) == {"static": {"v": 1}}
        kept(app, 2)
        vendor_file.write_text(json.dumps({"v": 2, "edited": True}))
        # Read again within the file's check interval (a second): never the old bytes after.
        wait_until(
            lambda: json.loads(conn.ask(via_proxy(paths[0], vm.uuid))[2]).get("v") == 2,
            what="the edited file served",
        )
        assert json.loads(conn.ask(via_proxy(paths[0], vm.uuid))[2]) == {"v": 2, "edited": True}
        assert json.loads(conn.ask(via_proxy(paths[1], vm.uuid))[2]) == {
            "static": {"v": 2, "edited": True}
        }
