"""hosts.py: when a host counts as booting its guests."""

from __future__ import annotations

from cloudseed.nova_metadata.hosts import WINDOW, HostBoots


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_third_guest_of_a_host_to_miss_wakes_it_once() -> None:
    clock = Clock()
    boots = HostBoots(3, clock=clock)
    assert not boots.missed("h1", "a")
    assert not boots.missed("h1", "a")  # the same guest again is not another one
    assert not boots.missed("h1", "b")
    assert not boots.missed("h2", "c")  # another host's guest counts for that host
    assert boots.missed("h1", "c")
    assert not boots.missed("h1", "d")  # woken already
    clock.now += WINDOW
    assert not boots.missed("h1", "e")  # a new window counts again
    assert not boots.missed("h1", "f")
    assert boots.missed("h1", "g")


def test_misses_spread_wider_than_the_window_wake_nothing() -> None:
    clock = Clock()
    boots = HostBoots(2, clock=clock)
    assert not boots.missed("h1", "a")
    clock.now += WINDOW + 1
    assert not boots.missed("h1", "b")  # the first one has gone out of the window
    assert boots.missed("h1", "c")


def test_no_host_or_turned_off_wakes_nothing() -> None:
    on, off = HostBoots(1), HostBoots(0)
    assert not on.missed(None, "a")
    assert not on.missed("", "a")
    assert on.missed("h1", "a")
    assert not off.missed("h1", "a")


def test_many_hosts_are_forgotten_once_their_window_is_over() -> None:
    clock = Clock()
    boots = HostBoots(2, clock=clock)
    for n in range(5000):
        boots.missed(f"h{n}", "a")
    clock.now += WINDOW
    boots.missed("last", "a")
    boots.missed("last2", "a")
    assert len(boots._missed) < 4096
