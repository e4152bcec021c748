"""``cloudseed nova-metadata`` against real Nova 34: the same databases, the same nova.conf,
every path of both metadata trees equal to what Nova's own metadata API serves.

Nova (``nova==34.0.0`` from PyPI, in ``.cache/nova-venv``) is deployed once per backend
(SQLite always; PostgreSQL and MariaDB when their servers answer, a failure when they do not
under ``CLOUDSEED_REQUIRE_DBS=1``) by tests/support/nova_peer.py: API database, cell0, cell1,
the instance shapes of tests/support/nova_seed.py written by Nova's own objects, Nova's
metadata API and compute API under gunicorn, Neutron/Glance/Placement stand-ins
(tests/support/nova_stubs.py). The drop-in then runs as a real process on the same nova.conf.

What is compared (tests/support/metadata_crawl.py): for each instance, the paths a guest can
reach in both trees, crawled by following the listings; status codes, media types, and bodies
(JSON-equal for JSON, byte-equal otherwise; ``random_seed`` only present on both sides).

Nova's freshness: nova.conf sets ``[api] metadata_cache_expiration = 0`` (Nova reads the
databases on every request: the changes test reads Nova's answer right after each change).
Full crawls go through ``Nova.snapshot()``, Nova's metadata API in a new process with its cache
on, so that one instance's ~300 paths cost one database read instead of 300 (0.5 s instead of
35 s); the new process reads the databases as they are when the crawl starts.

EC2 ids (``instance_id_mappings``, ``s3_images``) are created on first use by whichever side
serves an instance first: the first comparison lets the drop-in go first for every other
instance, so ids it creates must be the ones Nova then reads, and the other way round.
"""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import databases, nova_peer
from tests.support.cloudinit_run import CloudInitRun
from tests.support.metadata_crawl import Page, compare, http_crawl, report
from tests.support.metadata_relay import Target, metadata_relay, vendordata_target
from tests.support.nova_dropin import DropIn, running_dropin
from tests.support.nova_peer import Nova, Shape
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.compat,
    # Until the service and this proof meet on one branch (then it is always there).
    pytest.mark.skipif(
        importlib.util.find_spec("cloudseed.nova_metadata") is None,
        reason="cloudseed.nova_metadata (the drop-in service) is not in this tree",
    ),
]

# How long a change made through Nova's API may take to reach guests through the drop-in.
FRESHNESS = 1.0
STATIC_VENDORDATA = {
    "cloud-init": "#cloud-config\nbootcmd: [echo static vendordata]\n",
    "nested": {"list": [1, 2.5, None, "\u00e9"]},
}
# What the DynamicJSON target answers: cloud-init takes a string under the target's name.
DYNAMIC_VENDORDATA = "#cloud-config\nruncmd: [echo dynamic vendordata]\n"
# Direct mode: no proxy; the guest is whoever has the caller's address as a fixed IP.
DIRECT_MODE = "[neutron]\nservice_metadata_proxy = false\n"


def _unavailable(problem: str) -> None:
    if nova_peer.required():
        pytest.fail(f"CLOUDSEED_REQUIRE_DBS=1 but {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    """The DynamicJSON vendordata target both Nova and the drop-in ask (no auth, as Nova does
    without ``[vendordata_dynamic_auth]``)."""
    with vendordata_target(DYNAMIC_VENDORDATA) as running:
        yield running


@pytest.fixture(scope="module", params=databases.BACKENDS)
def nova(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, target: Target
) -> Iterator[Nova]:
    backend = str(request.param)
    directory = tmp_path_factory.mktemp(f"nova-{backend}")
    static = directory / "vendor_data.json"
    static.write_text(json.dumps(STATIC_VENDORDATA))
    api_conf = (
        "vendordata_providers = StaticJSON,DynamicJSON\n"
        f"vendordata_jsonfile_path = {static}\n"
        f"vendordata_dynamic_targets = cloud-init@{target.url}\n"
    )
    try:
        with nova_peer.running_nova(directory / "nova", backend, api_conf=api_conf) as deployment:
            yield deployment
    except nova_peer.NovaUnavailable as exc:
        _unavailable(f"Nova 34 cannot be installed here: {exc}")
    except databases.Unavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="module")
def dropin(nova: Nova) -> Iterator[DropIn]:
    with running_dropin(nova.conf, nova.directory / "dropin") as running:
        yield running


def dropin_crawl(dropin: DropIn, nova: Nova, shape: Shape) -> dict[str, Page]:
    return http_crawl(dropin.url, nova.metadata_headers(shape.uuid))


def assert_same(
    nova: Nova, dropin: DropIn, expected: dict[str, Page], actual: dict[str, Page], shape: Shape
) -> None:
    differences = compare(expected, actual)
    assert not differences, (
        f"{shape.name} ({shape.uuid}, {nova.backend}): {len(differences)} paths differ\n"
        f"{report(differences)}\n--- drop-in log ---\n{dropin.log()}"
    )


def compare_all(
    nova: Nova, dropin: DropIn, *, dropin_first: bool = False, only: tuple[str, ...] = ()
) -> dict[str, dict[str, Page]]:
    """Crawl every shape (or those named in ``only``) through a fresh snapshot of Nova and
    through the drop-in and assert they agree; Nova's crawls by shape name. Prints how long
    each side's crawls took."""
    crawls: dict[str, dict[str, Page]] = {}
    seconds = {"nova": 0.0, "drop-in": 0.0}

    def timed(side: str, crawl: Callable[[], dict[str, Page]]) -> dict[str, Page]:
        started = time.monotonic()
        try:
            return crawl()
        finally:
            seconds[side] += time.monotonic() - started

    started = time.monotonic()
    with nova.snapshot() as snapshot:
        print(
            f"{nova.backend}: Nova's snapshot metadata API up in {time.monotonic() - started:.1f} s"
        )
        shapes = [shape for shape in nova.shapes.values() if not only or shape.name in only]
        for index, shape in enumerate(shapes):

            def theirs(shape: Shape = shape) -> dict[str, Page]:
                return timed("nova", lambda: nova.crawl(shape, snapshot))

            def ours(shape: Shape = shape) -> dict[str, Page]:
                return timed("drop-in", lambda: dropin_crawl(dropin, nova, shape))

            if dropin_first and index % 2 == 0:
                actual = ours()
                expected = theirs()
            else:
                expected = theirs()
                actual = ours()
            assert_same(nova, dropin, expected, actual, shape)
            crawls[shape.name] = expected
    paths = sum(len(pages) for pages in crawls.values())
    print(
        f"{nova.backend}: {paths} paths of {len(crawls)} instances compared; crawls took "
        + ", ".join(f"{side} {value:.1f} s" for side, value in seconds.items())
    )
    return crawls


def document(pages: dict[str, Page], path: str) -> Any:
    page = pages[path]
    assert page.status == 200, (path, page)
    return json.loads(page.body)


# -- the tests ------------------------------------------------------------------------------------


def test_every_path_of_every_shape_is_what_nova_serves(nova: Nova, dropin: DropIn) -> None:
    crawls = compare_all(nova, dropin, dropin_first=True)
    # The crawl reached the trees, not just their refusals: a live instance has ~300 paths
    # (10 EC2 versions x ~20 entries, 6 OpenStack versions x 6 documents); a deleted one only
    # the root listing and the refusals.
    for name, pages in crawls.items():
        assert len(pages) > (250 if not nova.shapes[name].deleted else 20), (name, len(pages))

    # And what Nova serves is what was seeded (so the comparison compared something).
    twonics, x509, tagged, deleted = (
        crawls[name] for name in ("twonics", "x509", "tagged", "deleted")
    )
    network = document(twonics, "/openstack/latest/network_data.json")
    assert [n["type"] for n in network["networks"]] == [
        "ipv4_dhcp",
        "ipv6_dhcpv6-stateful",
        "ipv4",
        "ipv6",
    ]
    assert twonics["/latest/meta-data/public-ipv4"].body == b"203.0.113.50"
    assert twonics["/latest/meta-data/kernel-id"].body.startswith(b"aki-")
    assert twonics["/latest/meta-data/security-groups"].body == b"default\nweb\ndefault\nweb"
    meta = document(x509, "/openstack/latest/meta_data.json")
    assert [k["type"] for k in meta["keys"]] == ["x509"]
    devices = document(tagged, "/openstack/latest/meta_data.json")["devices"]
    assert [d["tags"] for d in devices] == [["uplink"], ["database"], ["legacy"]]
    assert {path for path, page in deleted.items() if page.status == 200} == {"/"}
    # Nova's injected network template (networks built with flat_injected).
    injected = crawls["injected"]
    assert document(injected, "/openstack/latest/meta_data.json")["network_config"] == {
        "name": "network_config",
        "content_path": "/content/0000",
    }
    template = injected["/openstack/content/0000"].body.decode()
    assert "\nauto eth1\niface eth1 inet static\n" in template
    assert "iface eth1 inet6 static\n" in template and "auto eth0" not in template
    assert "    broadcast None\n" in template  # eth2's /31, as netaddr gives it
    assert twonics["/openstack/content/0000"].status == 404


# What does not depend on the database behind Nova runs on SQLite only: the other backends'
# variants are not even collected (a skip would read as something missing in CI).
SQLITE_ONLY = pytest.mark.parametrize("nova", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_dynamic_vendordata_target_is_asked_the_same_question(
    nova: Nova, dropin: DropIn, target: Target
) -> None:
    shape = nova.shapes["items"]
    bodies = []
    for url in (nova.metadata_url, dropin.url):
        target.bodies.clear()
        response = httpx.get(
            f"{url}/openstack/latest/vendor_data2.json",
            headers=nova.metadata_headers(shape.uuid),
            timeout=30,
        )
        assert response.status_code == 200, response.text
        # Each target's answer goes under the target's name.
        assert response.json() == {"static": STATIC_VENDORDATA, "cloud-init": DYNAMIC_VENDORDATA}
        bodies.append(list(target.bodies))
    nova_bodies, dropin_bodies = bodies
    assert len(nova_bodies) == 1
    assert dropin_bodies == nova_bodies


@SQLITE_ONLY
def test_direct_mode_finds_the_guest_by_its_fixed_ip(nova: Nova, tmp_path: Path) -> None:
    """``[neutron] service_metadata_proxy = false``: the caller's address (here 127.0.0.1, the
    fixed IP of the shape "direct" in Neutron's ports) names the instance; identity headers
    are ignored, by Nova with a warning."""
    shape = nova.shapes["direct"]
    overlay = tmp_path / "direct.conf"
    overlay.write_text(DIRECT_MODE)
    someone_else = nova.metadata_headers(nova.shapes["onekey"].uuid)
    with (
        nova.snapshot(DIRECT_MODE) as snapshot,
        running_dropin(nova.conf, tmp_path / "dropin", extra_conf=(overlay,)) as direct,
    ):
        expected = http_crawl(snapshot, {})
        actual = http_crawl(direct.url, {})
        assert_same(nova, direct, expected, actual, shape)
        assert document(expected, "/openstack/latest/meta_data.json")["uuid"] == shape.uuid
        for url in (snapshot, direct.url):
            spoofed = httpx.get(
                f"{url}/openstack/latest/meta_data.json", headers=someone_else, timeout=30
            )
            assert spoofed.json()["uuid"] == shape.uuid, url


def _meta(client: httpx.Client, nova: Nova, shape: Shape) -> Any:
    response = client.get(
        "/openstack/latest/meta_data.json", headers=nova.metadata_headers(shape.uuid)
    )
    return response.json() if response.status_code == 200 else response.status_code


def test_changes_through_nova_api_reach_guests_within_a_second(nova: Nova, dropin: DropIn) -> None:
    shapes = nova.shapes
    new_user_data = gzip.compress(b"#cloud-config\nruncmd: [[echo, rebuilt]]\n", mtime=0)
    seen: dict[str, float] = {}
    with (
        nova.compute_client() as api,
        httpx.Client(base_url=dropin.url, timeout=10) as guest,
        httpx.Client(base_url=nova.metadata_url, timeout=30) as nova_guest,
    ):

        def dropin_meta(shape: Shape) -> Any:
            return _meta(guest, nova, shape)

        def dropin_get(shape: Shape, path: str) -> httpx.Response:
            return guest.get(path, headers=nova.metadata_headers(shape.uuid))

        # Metadata items: one changed, one deleted, one added.
        items = shapes["items"]
        assert (
            api.put(
                f"/servers/{items.uuid}/metadata/role", json={"meta": {"role": "db"}}
            ).status_code
            == 200
        )
        assert api.delete(f"/servers/{items.uuid}/metadata/tier").status_code == 204
        assert (
            api.post(
                f"/servers/{items.uuid}/metadata", json={"metadata": {"added": "yes"}}
            ).status_code
            == 200
        )
        wanted_meta = {"role": "db", "unicode": "caf\u00e9", "added": "yes"}
        seen["metadata items"] = eventually(
            lambda: dropin_meta(items)["meta"] == wanted_meta, timeout=FRESHNESS
        )
        assert _meta(nova_guest, nova, items)["meta"] == wanted_meta

        # Rebuild with another key pair and new user data (2.57).
        rebuilt = shapes["rebuildme"]
        response = api.post(
            f"/servers/{rebuilt.uuid}/action",
            json={
                "rebuild": {
                    "imageRef": "c0ffee00-0000-4000-8000-000000000001",
                    "key_name": "peer-ssh-2",
                    "user_data": base64.b64encode(new_user_data).decode(),
                }
            },
        )
        assert response.status_code == 202, response.text
        new_key = nova.keypairs["peer-ssh-2"]["public_key"]

        def rebuilt_everywhere() -> bool:
            meta = dropin_meta(rebuilt)
            return (
                meta["public_keys"] == {"peer-ssh-2": new_key}
                and dropin_get(rebuilt, "/openstack/latest/user_data").content == new_user_data
                and dropin_get(rebuilt, "/latest/meta-data/public-keys/0/openssh-key").text
                == new_key
            )

        seen["rebuild"] = eventually(rebuilt_everywhere, timeout=FRESHNESS)

        # Hostname change (2.90).
        renamed = shapes["renameme"]
        response = api.put(
            f"/servers/{renamed.uuid}", json={"server": {"hostname": "renamed-host"}}
        )
        assert response.status_code == 200, response.text
        seen["hostname"] = eventually(
            lambda: (
                dropin_get(renamed, "/latest/meta-data/hostname").text == "renamed-host.novalocal"
            ),
            timeout=FRESHNESS,
        )

        # Delete (the compute host is down: Nova deletes the instance itself).
        gone = shapes["deleteme"]
        assert api.delete(f"/servers/{gone.uuid}").status_code == 204
        seen["delete"] = eventually(lambda: dropin_meta(gone) == 404, timeout=FRESHNESS)
        assert _meta(nova_guest, nova, gone) == 404

        # A guest sets its password through Nova's metadata API; the drop-in serves it, and
        # refuses a second one as Nova does.
        pw = shapes["pwreset"]
        secret = base64.b64encode(b"\x01encrypted-password" * 8).decode()
        response = nova_guest.post(
            "/openstack/latest/password", content=secret, headers=nova.metadata_headers(pw.uuid)
        )
        assert response.status_code == 200, response.text
        seen["password set through Nova"] = eventually(
            lambda: dropin_get(pw, "/openstack/latest/password").text == secret,
            timeout=FRESHNESS,
        )
        again = guest.post(
            "/openstack/latest/password", content="other", headers=nova.metadata_headers(pw.uuid)
        )
        assert again.status_code == 409, again.text
        # The admin clears it through the compute API.
        assert api.delete(f"/servers/{pw.uuid}/os-server-password").status_code == 204
        seen["password cleared"] = eventually(
            lambda: dropin_get(pw, "/openstack/latest/password").content == b"",
            timeout=FRESHNESS,
        )

        # A guest sets its password through the drop-in: Nova's API and metadata API see it.
        own = shapes["pwdropin"]
        secret2 = base64.b64encode(b"\x02dropin-password" * 8).decode()
        response = guest.post(
            "/openstack/latest/password", content=secret2, headers=nova.metadata_headers(own.uuid)
        )
        assert response.status_code == 200, response.text
        assert api.get(f"/servers/{own.uuid}/os-server-password").json() == {"password": secret2}
        assert (
            nova_guest.get(
                "/openstack/latest/password", headers=nova.metadata_headers(own.uuid)
            ).text
            == secret2
        )
        conflict = nova_guest.post(
            "/openstack/latest/password", content="other", headers=nova.metadata_headers(own.uuid)
        )
        assert conflict.status_code == 409

    print(f"{nova.backend}: seconds until the drop-in served each change: {seen}")
    # Then every path of each changed instance again (the others were compared before).
    compare_all(
        nova,
        dropin,
        only=("items", "rebuildme", "renameme", "deleteme", "pwreset", "pwdropin"),
    )


@SQLITE_ONLY
def test_cloud_init_reads_a_nova_instance_through_the_dropin(
    nova: Nova, dropin: DropIn, cloud_init: Path, tmp_path: Path
) -> None:
    shape = nova.shapes["cloudinit"]
    with nova.snapshot() as snapshot:
        truth = nova.crawl(shape, snapshot)
    meta = document(truth, "/openstack/latest/meta_data.json")
    network = document(truth, "/openstack/latest/network_data.json")
    mac = network["links"][0]["ethernet_mac_address"]
    key = nova.keypairs["peer-ssh"]["public_key"]
    user_data = truth["/openstack/latest/user_data"].body
    ec2_id = truth["/latest/meta-data/instance-id"].body.decode()
    with (
        metadata_relay(
            dropin.url, instance_id=shape.uuid, tenant_id=nova.project_id, secret=nova.secret
        ) as relay,
        CloudInitRun(
            cloud_init,
            relay.url,
            mac,
            tmp_path / "guest",
            "openstack-reader",
            "openstack-datasource",
            "ec2-helpers",
            "ec2-datasource-v1",
        ) as run,
    ):
        out = run.result()
    print(f"cloud-init {out['cloud_init_version']}: {run.seconds:.1f} s")

    reader = out["openstack-reader"]
    assert reader["version"] == "2018-08-27"
    read = reader["read_v2"]
    assert read["metadata"]["uuid"] == read["metadata"]["instance-id"] == shape.uuid
    assert read["metadata"]["local-hostname"] == meta["hostname"] == "cloudinit.novalocal"
    assert read["metadata"]["public_keys"] == {"peer-ssh": key}
    assert read["metadata"]["meta"] == {"purpose": "cloud-init"}
    assert reader["public_keys"] == [key]
    assert reader["vendordata_raw"] == STATIC_VENDORDATA["cloud-init"]
    assert reader["vendordata2_raw"] == DYNAMIC_VENDORDATA
    assert unb64(read["userdata"]) == user_data
    assert read["ec2-metadata"]["instance-id"] == ec2_id
    (nic,) = reader["network_config"]["config"][:1]
    assert (nic["type"], nic["mac_address"]) == ("physical", mac)

    ds = out["openstack-datasource"]
    assert ds["get_data"] is True
    assert ds["instance_id"] == shape.uuid
    assert ds["public_keys"] == [key]
    assert unb64(ds["userdata_raw"]) == user_data
    assert ds["availability_zone"] == "az-peer"
    assert ds["vendordata_raw"] == STATIC_VENDORDATA["cloud-init"]
    assert ds["vendordata2_raw"] == DYNAMIC_VENDORDATA
    assert ds["network_config"] == reader["network_config"]

    helpers = out["ec2-helpers"]
    assert helpers["meta_data"]["instance-id"] == ec2_id
    assert helpers["meta_data"]["public-keys"] == {"peer-ssh": key}
    assert helpers["meta_data"]["placement"] == {"availability-zone": "az-peer"}
    assert unb64(helpers["user_data"]) == user_data
    ec2 = out["ec2-datasource-v1"]
    assert ec2["get_data"] is True
    assert ec2["instance_id"] == ec2_id
    assert ec2["public_keys"] == [key]
    assert unb64(ec2["userdata_raw"]) == user_data


def unb64(value: Any) -> bytes:
    """Bytes as the client script encodes them; cloud-init gives text for some leaves."""
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    assert isinstance(value, str), value
    return value.encode()
