"""Where signed identity lives in the trees (metadata/tree.py): EC2's dynamic/ from 2009-04-04
(and latest), the identity token under openstack/latest only."""

from __future__ import annotations

import pytest

from cloudseed.metadata import tree


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/latest/dynamic", tree.Target(tree.EC2_DYNAMIC, "2009-04-04")),
        ("/latest/dynamic/", tree.Target(tree.EC2_DYNAMIC, "2009-04-04")),
        (
            "/latest/dynamic/instance-identity/document",
            tree.Target(tree.EC2_DYNAMIC, "2009-04-04", ("instance-identity", "document")),
        ),
        (
            "/2009-04-04/dynamic/instance-identity/pkcs7",
            tree.Target(tree.EC2_DYNAMIC, "2009-04-04", ("instance-identity", "pkcs7")),
        ),
        (
            "/ec2/latest/dynamic/instance-identity/rsa2048",
            tree.Target(tree.EC2_DYNAMIC, "2009-04-04", ("instance-identity", "rsa2048")),
        ),
        ("/2008-09-01/dynamic/instance-identity/document", None),
        ("/1.0/dynamic", None),
        ("/openstack/latest/identity_token", tree.Target(tree.IDENTITY_TOKEN, "2025-04-04")),
        ("/openstack/latest/identity_token/", tree.Target(tree.IDENTITY_TOKEN, "2025-04-04")),
        ("/openstack/2025-04-04/identity_token", None),
        ("/openstack/latest/identity_token/x", None),
    ],
)
def test_paths(path: str, expected: tree.Target | None) -> None:
    assert tree.parse(path) == expected
