"""The IO-free drive tree: which files, from the metadata renderer, and what a rebuild carries
over."""

from __future__ import annotations

import base64
import json

from cloudseed.configdrive import contents
from cloudseed.metadata import render, render_ec2
from cloudseed.metadata import versions as v
from tests.support.guest_facts import facts

SEED = base64.b64encode(b"s" * 512)


def data(**changes: object) -> contents.DriveData:
    values: dict[str, object] = dict(
        dhcp_domain="novalocal",
        vendor_data_json=b'{"a":1}',
        vendor_data2_json=b'{"static":{"a":1}}',
        admin_pass="Secret12",
        files=(("/etc/motd", b"hello\n"), ("/root/x", b"\x00\xff")),
        seed=SEED,
    )
    values.update(changes)
    return contents.DriveData(**values)  # type: ignore[arg-type]


def test_every_openstack_version_and_latest() -> None:
    tree = contents.drive_tree(facts(), data())
    dirs = sorted({p.split("/")[1] for p in tree if p.startswith("openstack/")})
    assert dirs == sorted([*v.OPENSTACK_VERSIONS, "content", "latest"])
    assert set(p.rsplit("/", 1)[1] for p in tree if p.startswith("openstack/2012-08-10/")) == {
        "meta_data.json",
        "user_data",
    }
    assert set(p.rsplit("/", 1)[1] for p in tree if p.startswith("openstack/latest/")) == {
        "meta_data.json",
        "user_data",
        "vendor_data.json",
        "network_data.json",
        "vendor_data2.json",
    }
    assert tree["openstack/2015-10-15/network_data.json"] == render.network_data(facts())
    assert "openstack/2015-10-15/vendor_data2.json" not in tree
    assert tree["openstack/2016-10-06/vendor_data2.json"] == b'{"static":{"a":1}}'


def test_meta_data_is_the_renderers_with_password_and_files() -> None:
    tree = contents.drive_tree(facts(), data())
    for name in (*v.OPENSTACK_VERSIONS, "latest"):
        version = v.openstack_version(name)
        assert version is not None
        expected = render.meta_data(
            facts(),
            render.meta_data_variant(version),
            dhcp_domain="novalocal",
            extra={"admin_pass": "Secret12"},
            files=[
                {"path": "/etc/motd", "content_path": "/content/0000"},
                {"path": "/root/x", "content_path": "/content/0001"},
            ],
        ).render(SEED)
        assert tree[f"openstack/{name}/meta_data.json"] == expected
    meta = json.loads(tree["openstack/latest/meta_data.json"])
    assert meta["admin_pass"] == "Secret12"
    assert tree["openstack/content/0000"] == b"hello\n"
    assert tree["openstack/content/0001"] == b"\x00\xff"


def test_seed_fresh_per_drive() -> None:
    one = contents.drive_tree(facts(), data(seed=None))
    two = contents.drive_tree(facts(), data(seed=None))
    seed = json.loads(one["openstack/latest/meta_data.json"])["random_seed"]
    assert len(base64.b64decode(seed)) == 512
    assert seed != json.loads(two["openstack/latest/meta_data.json"])["random_seed"]


def test_no_user_data_no_password_no_static_vendordata() -> None:
    tree = contents.drive_tree(
        facts(user_data=None), data(admin_pass=None, files=(), vendor_data_json=None)
    )
    assert not any(p.endswith(("user_data", "user-data", "vendor_data.json")) for p in tree)
    assert not any(p.startswith("openstack/content/") for p in tree)
    meta = json.loads(tree["openstack/latest/meta_data.json"])
    assert "admin_pass" not in meta and "files" not in meta


def test_ec2_tree_skips_novas_default_versions() -> None:
    tree = contents.drive_tree(facts(), data())
    assert sorted(p for p in tree if p.startswith("ec2/")) == [
        "ec2/2009-04-04/meta-data.json",
        "ec2/2009-04-04/user-data",
        "ec2/latest/meta-data.json",
        "ec2/latest/user-data",
    ]
    assert tree["ec2/latest/meta-data.json"] == render_ec2.ec2_meta_data_json(
        facts(), v.EC2_LATEST, dhcp_domain="novalocal"
    )
    assert tree["ec2/latest/user-data"] == b"hello"
    fewer = contents.drive_tree(
        facts(), data(skip_versions=contents.skip_versions("latest 2009-04-04 1.0"))
    )
    assert sorted({p.split("/")[1] for p in fewer if p.startswith("ec2/")}) == [
        "2007-01-19",
        "2007-03-01",
        "2007-08-29",
        "2007-10-10",
        "2007-12-15",
        "2008-02-01",
        "2008-09-01",
    ]


def test_carried_over_from_a_tree() -> None:
    tree = contents.drive_tree(facts(), data())
    carried = contents.carried_over(tree)
    assert carried.admin_pass == "Secret12"
    assert carried.files == (("/etc/motd", b"hello\n"), ("/root/x", b"\x00\xff"))
    assert contents.carried_over({}) == contents.Carried(None, ())
    assert contents.carried_over({"openstack/latest/meta_data.json": b"not json"}) == (
        contents.Carried(None, ())
    )


def test_directories_parents_first() -> None:
    assert contents.directories(["a/b/c", "a/d", "e"]) == ["a", "a/b"]
