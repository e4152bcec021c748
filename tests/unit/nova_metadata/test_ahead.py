"""The documents made ahead of a guest's first request (nova_metadata/ahead.py) are the ones
its requests would make: same targets as the paths parse to, same bytes, and only what the app
keeps per instance."""

from __future__ import annotations

import pytest

from cloudseed.nova_metadata import ahead, paths, render
from cloudseed.nova_metadata.guests import NovaGuest
from tests.support.nova_golden import GOLDEN, facts_of

# What cloud-init asks first (bench/storm_crawl.py's list, and its reader's 2018-08-27).
ASKED_FIRST = [
    "/openstack/latest/user_data",
    "/openstack/latest/network_data.json",
    "/openstack/2018-08-27/user_data",
    "/openstack/2018-08-27/network_data.json",
    "/latest/meta-data/",
    "/latest/meta-data/public-keys/0/openssh-key",
    "/latest/user-data",
    "/latest/meta-data/hostname",
    "/latest/meta-data/block-device-mapping/root",
]


@pytest.mark.parametrize("shape", sorted(GOLDEN))
def test_each_document_made_ahead_is_the_one_its_request_makes(shape: str) -> None:
    facts = facts_of(shape)
    made = dict(ahead.documents(facts, "novalocal"))
    inputs = render.Inputs(dhcp_domain="novalocal", address="10.0.0.5")
    for target, document in made.items():
        assert render.cacheable(facts, target), target
        assert render.document(target, facts, inputs) == document, target
    for path in ASKED_FIRST:
        asked = paths.parse(path)
        assert asked is not None
        try:
            expected = render.document(asked, facts, inputs)
        except render.NotInTree:
            assert asked not in made, path  # no user data: nothing made
            continue
        assert made[asked] == expected, path
    # The version's listing is not made ahead: where signed identity is served it names
    # dynamic/, which only the request's inputs know.
    listing = paths.parse("/latest")
    assert listing is not None and listing not in made
    with_identity = render.Inputs(dhcp_domain="novalocal", dynamic=True)
    assert b"dynamic/" in render.document(listing, facts, with_identity)[0]
    # Neither Neutron's answer nor the vendordata is made ahead.
    groups = paths.parse("/latest/meta-data/security-groups")
    assert groups is not None and groups not in made
    assert not any(t.kind == paths.OPENSTACK and t.rest[0] == paths.VENDOR_DATA2 for t in made)


def test_a_guest_prepared_answers_its_first_documents_without_rendering() -> None:
    facts = facts_of(sorted(GOLDEN)[0])
    guest = NovaGuest(facts, "novalocal")
    guest.prepare()

    def not_again() -> tuple[bytes, bytes]:
        raise AssertionError("rendered at the request")

    target = paths.parse("/latest/meta-data/")
    assert target is not None
    assert guest.document(target, not_again)[0].startswith(b"ami-id\n")
