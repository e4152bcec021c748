"""``phone_home`` in the OpenStack tree: cloudseed's own target, at every version."""

from __future__ import annotations

from cloudseed.metadata import tree


def test_phone_home_at_every_openstack_version() -> None:
    for version in ("latest", "2012-08-10", "2018-08-27"):
        target = tree.parse(f"/openstack/{version}/phone_home")
        assert target is not None and target.kind == tree.PHONE_HOME
    assert tree.parse("/openstack/latest/phone_home/") == tree.parse("/openstack/latest/phone_home")


def test_nothing_else_is_phone_home() -> None:
    for path in (
        "/openstack/phone_home",
        "/openstack/latest/phone_home/x",
        "/openstack/1999-01-01/phone_home",
        "/latest/phone_home",
        "/latest/meta-data/phone_home",
    ):
        target = tree.parse(path)
        assert target is None or target.kind != tree.PHONE_HOME, path
