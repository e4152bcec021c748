"""The IO-free renderer against Nova 34's own answers.

``nova34_golden.json`` holds, for eight instances made by Nova 34's own objects (no key, one
key, an x509 key with a second key, a config drive, metadata items with user data, two NICs
with IPv4 and IPv6 over DHCP and static subnets with routes and a floating IP, device tags,
a set password), the rows the drop-in reads (as ``loading.py`` reads them) and what Nova 34's
metadata API answered for 56 paths of both trees (``random_seed`` left out). It was captured
from the deployment of tests/support's Nova peer (the differential test in tests/compat/
crawls every path of a live Nova instead). Here every answer is rendered from the rows alone.
"""

from __future__ import annotations

import json

import pytest

from cloudseed.nova_metadata import paths, render
from tests.support.nova_golden import GOLDEN, facts_of

CASES = [(shape, path) for shape in sorted(GOLDEN) for path in sorted(GOLDEN[shape]["answers"])]


def answer(shape: str, path: str) -> tuple[int, bytes]:
    """What the drop-in answers for ``path`` (no vendordata file: StaticJSON alone, as the
    peer's nova.conf)."""
    if paths.is_root(path):
        return 200, render.EC2_VERSIONS
    target = paths.parse(path)
    if target is None:
        return 404, b""
    inputs = render.Inputs(
        dhcp_domain="novalocal",
        address="10.0.0.5",
        security_groups=GOLDEN[shape]["security_groups"],
        vendor_data_json=b"{}",
        vendor_data2=b'{"static": {}}',
        today="2026-11-28",
    )
    try:
        return 200, render.document(target, facts_of(shape), inputs)[0]
    except render.NotInTree:
        return 404, b""


@pytest.mark.parametrize(("shape", "path"), CASES)
def test_answer_is_nova34s(shape: str, path: str) -> None:
    expected = GOLDEN[shape]["answers"][path]
    status, body = answer(shape, path)
    assert status == expected["status"]
    if "json" in expected:
        document = json.loads(body)
        assert "random_seed" in document or path.startswith("/openstack/2012-08-10/")
        document.pop("random_seed", None)
        assert document == expected["json"]
    elif "text" in expected:
        assert body.decode() == expected["text"]


def test_meta_data_is_nova34s_byte_for_byte_around_the_seed() -> None:
    """Not only JSON-equal: the same bytes, key order and escapes, but for the seed."""
    for shape in GOLDEN:
        for version in ("2012-08-10", "2013-04-04", "2018-08-27", "latest"):
            expected = GOLDEN[shape]["answers"][f"/openstack/{version}/meta_data.json"]["raw"]
            target = paths.parse(f"/openstack/{version}")
            assert target is not None
            seeded = render.meta_data(facts_of(shape), target.version, dhcp_domain="novalocal")
            assert seeded.render(b"SEED").decode() == expected


def test_a_fresh_seed_in_every_answer() -> None:
    seeded = render.meta_data(facts_of("nokey"), "2025-04-04", dhcp_domain="novalocal")
    seeds = {json.loads(seeded.render())["random_seed"] for _ in range(3)}
    assert len(seeds) == 3
    assert all(len(s) == 684 for s in seeds)  # base64 of 512 bytes


def test_every_shape_is_covered() -> None:
    assert sorted(GOLDEN) == [
        "drive",
        "items",
        "nokey",
        "onekey",
        "password",
        "tagged",
        "twonics",
        "x509",
    ]
    assert sum(len(GOLDEN[s]["answers"]) for s in GOLDEN) == len(CASES) == 448
