"""ConnectionCap and Deadlines (connection_limits.py), without sockets: the counts per
address, what is exempt, that nothing leaks, and that refusals are logged once a minute."""

from __future__ import annotations

import ipaddress
import logging

import pytest

from cloudseed.connection_limits import ConnectionCap, Deadlines


def test_the_cap_counts_each_address_on_its_own() -> None:
    refusals: list[None] = []
    cap = ConnectionCap(2, refused=lambda: refusals.append(None))
    assert [cap.admit("10.0.0.1", 0.0) for _ in range(3)] == [True, True, False]
    assert cap.admit("10.0.0.2", 0.0)  # another address is not affected
    assert cap.open_from("10.0.0.1") == 2 and len(refusals) == 1
    cap.release("10.0.0.1")
    assert cap.admit("10.0.0.1", 0.0)
    assert not cap.admit("10.0.0.1", 0.0)
    assert len(refusals) == 2


def test_nothing_is_left_once_every_connection_closed() -> None:
    cap = ConnectionCap(3)
    for _ in range(1000):
        admitted = [a for a in ("10.0.0.1", "10.0.0.2", "::1") * 4 if cap.admit(a, 0.0)]
        assert len(admitted) == 9
        for address in admitted:
            cap.release(address)
    assert cap.addresses == 0 and cap.open_from("10.0.0.1") == 0


def test_proxies_are_exempt_v4_mapped_too() -> None:
    cap = ConnectionCap(
        1,
        exempt=[ipaddress.ip_network("192.0.2.0/24"), ipaddress.ip_network("2001:db8::/32")],
    )
    assert cap.exempts("192.0.2.7") and cap.exempts("::ffff:192.0.2.7")
    assert cap.exempts("2001:db8::1")
    assert not cap.exempts("192.0.3.1") and not cap.exempts("not an address")
    assert not ConnectionCap(1).exempts("192.0.2.7")


def test_refusals_are_logged_once_a_minute_per_address(caplog: pytest.LogCaptureFixture) -> None:
    cap = ConnectionCap(1, log_every=60.0)
    cap.admit("10.0.0.1", 0.0)
    cap.admit("10.0.0.2", 0.0)
    with caplog.at_level(logging.WARNING, logger="cloudseed.connection_limits"):
        for second in range(0, 120, 2):  # 60 refusals each, over two minutes
            cap.admit("10.0.0.1", float(second))
            cap.admit("10.0.0.2", float(second))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines  # two per address: at 0 s and at 60 s
    assert lines[0].startswith("refused a connection from 10.0.0.1: it has 1 open")
    assert "max_connections_per_address" in lines[0] and "more refused" not in lines[0]
    assert "; 29 more refused since the last such message" in lines[2]


def test_a_cap_below_one_is_a_mistake() -> None:
    with pytest.raises(ValueError):
        ConnectionCap(0)


def test_the_head_deadline_is_the_shorter_of_the_two() -> None:
    assert Deadlines(header=20, request=60).head == 20
    assert Deadlines(header=20, request=5).head == 5
    assert Deadlines(header=20, request=None).head == 20
