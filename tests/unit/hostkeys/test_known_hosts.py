"""known_hosts names and lines, as OpenSSH writes and looks them up."""

from __future__ import annotations

import pytest

from cloudseed.hostkeys.key_lines import parse_host_key
from cloudseed.hostkeys.known_hosts import forward_pattern, host_pattern, lines
from tests.support import keys


@pytest.mark.parametrize(
    ("address", "port", "expected"),
    [
        ("10.0.0.5", 22, "10.0.0.5"),
        ("10.0.0.5", 2222, "[10.0.0.5]:2222"),
        ("2001:db8::5", 22, "2001:db8::5"),
        ("2001:db8::5", 2222, "[2001:db8::5]:2222"),
        ("[2001:db8::5]", 10022, "[2001:db8::5]:10022"),
        ("host.example", 10022, "[host.example]:10022"),
    ],
)
def test_host_pattern(address: str, port: int, expected: str) -> None:
    assert host_pattern(address, port) == expected


def test_forward_pattern() -> None:
    assert forward_pattern("127.0.0.1:10022") == "[127.0.0.1]:10022"
    assert forward_pattern("[::1]:10022") == "[::1]:10022"
    assert forward_pattern("127.0.0.1:22") == "127.0.0.1"
    for bad in ("127.0.0.1", ":10022", "127.0.0.1:x", "127.0.0.1:" + "9" * 5000):
        assert forward_pattern(bad) is None


def test_lines_name_every_host_once_per_key() -> None:
    a, b = parse_host_key(keys.ed25519_public()), parse_host_key(keys.ecdsa_public())
    assert lines(["10.0.0.5", "[127.0.0.1]:10022", "10.0.0.5"], [a, b]) == [
        f"10.0.0.5,[127.0.0.1]:10022 {a.key}",
        f"10.0.0.5,[127.0.0.1]:10022 {b.key}",
    ]
    assert lines([], [a]) == []
