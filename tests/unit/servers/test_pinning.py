"""2.104's availability zone pin transitions, as Nova's ``ServersController.update`` makes them."""

from __future__ import annotations

import pytest

from cloudseed.servers.creation.pinning import current_zone, repinned
from cloudseed.servers.errors import NotCurrentZone, PinnedZoneChange


@pytest.mark.parametrize(
    "pinned, requested, after",
    [
        ("az1", None, None),  # unpin
        (None, None, None),  # unpin an unpinned server: a no-op
        (None, "az1", "az1"),  # re-pin to the zone it is in
        ("az1", "az1", "az1"),  # the same pin again: a no-op
    ],
)
def test_allowed(pinned, requested, after):
    assert repinned(pinned, requested, current="az1") == after


def test_a_pin_to_another_zone_than_the_servers_is_a_conflict():
    with pytest.raises(NotCurrentZone) as caught:
        repinned(None, "az2", current="az1")
    assert str(caught.value) == (
        "Server can only be pinned to its current availability zone 'az1', but 'az2' was requested."
    )


def test_a_pinned_server_is_unpinned_before_it_is_pinned_elsewhere():
    # Even to the zone it is in now: the pin names where it was created.
    with pytest.raises(PinnedZoneChange) as caught:
        repinned("az0", "az1", current="az1")
    assert str(caught.value) == (
        "Cannot change pinned availability zone directly. Unpin first by setting "
        "pinned_availability_zone to null."
    )


def test_current_zone_of_a_server_from_before_zones_were_recorded():
    assert current_zone(None) == "nova"
    assert current_zone("az1") == "az1"
